"""Options shared by ``trade tools call`` and ``play`` (which data, which day, which account), and the
``--anonymize-noise`` option every command offering ``--anonymize`` adds (trade-reward's, trade-eval's)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trade_core.params import ISO_DATE, FiniteRange, grouped
from trade_tools.records import NOISE_LIMIT

if TYPE_CHECKING:
    from trade_tools.episode import Episode


ANONYMIZE_NOISE = click.Option(
    ["--anonymize-noise"],
    metavar="SD",
    type=FiniteRange(0, NOISE_LIMIT),
    help="With --anonymize: perturb the bars the model reads, per day (sd of log levels, e.g. 0.01); "
    "orders and the reward stay real.",
)
"""The option wherever --anonymize is offered (`trade tools call/play`, `trade eval`, `trade data tasks`): add it
to a command's ``params``."""


def noise_of(anonymize: bool, noise: float | None) -> float | None:
    """The task's ``anonymize_noise``: ``noise``, which only an anonymized episode shows (else a usage error)."""
    if noise is not None and not anonymize:
        raise click.UsageError("--anonymize-noise perturbs what an anonymized episode shows: add --anonymize")
    return noise


def day_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--data", required=True, type=click.Path(path_type=Path), help="Dataset folder (trade data import/synth)."
        ),
        click.option("--date", "day", required=True, type=ISO_DATE, help="Trading day T0."),
        click.option("--pool", help="Comma-separated stock pool; default: a seeded sample of the universe."),
        click.option(
            "--holdings",
            help="Initial holdings SYMBOL=SHARES,...; default: 0-5 pool stocks drawn as in training "
            "(5-20% of --cash each).",
        ),
        click.option(
            "--cash",
            default=1_000_000.0,
            show_default=True,
            help="Capital, CNY: drawn holdings are bought from it; given holdings come on top.",
        ),
        click.option("--universe", default="csi300", show_default=True, help="Universe to sample the pool from."),
        click.option(
            "--seed",
            default=0,
            type=click.IntRange(min=0),
            show_default=True,
            help="Seed for the sampled pool and holdings.",
        ),
        click.option("--anonymize", is_flag=True, help="Aliases for symbols and dates in every text the model reads."),
    ]
    command = grouped(choice=DayChoice)(command)
    for option in reversed(options):
        command = option(command)
    return command


@dataclasses.dataclass(frozen=True)
class DayChoice:
    """The day ``trade tools call`` and ``play`` open, as their shared options (:func:`day_options`) give it."""

    data: Path
    day: dt.date
    pool: str | None
    holdings: str | None
    cash: float
    universe: str
    seed: int
    anonymize: bool
    anonymize_noise: float | None

    def open(self) -> Episode:
        from trade_data.store import MarketStore
        from trade_tools.episode import Episode
        from trade_tools.sampler import day_task, parse_holdings

        store = MarketStore.load(self.data)
        task = day_task(
            store,
            self.day,
            pool=self.pool.split(",") if self.pool is not None else None,
            holdings=parse_holdings(self.holdings) if self.holdings is not None else None,
            cash=self.cash,
            universe=self.universe,
            seed=self.seed,
        )
        task.anonymized = self.anonymize
        task.anonymize_noise = noise_of(self.anonymize, self.anonymize_noise)
        return Episode.start(task, store)
