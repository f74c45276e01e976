"""``trade data tasks --stats``: counts, date ranges, pool sizes, holdings and cash shares of a tasks folder."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from trade_core.errors import TradeError
from trade_reward.taskfolder import Manifest, read_manifest, read_records
from trade_tools.episode import Task


def _spread(values: list[float], fmt: str) -> str:
    """min/median/max of ``values``, formatted."""
    low, mid, high = np.quantile(values, [0.0, 0.5, 1.0])
    return "/".join(format(v, fmt) for v in (low, mid, high))


class SplitStats(BaseModel):
    """Distributions over one split's tasks."""

    name: str
    tasks: int
    first_t0: dt.date
    last_t0: dt.date
    pool_sizes: list[int]
    holdings: dict[int, int]
    """number of holdings -> tasks"""
    cash_shares: list[float]
    """cash / starting capital at cost, per task"""

    def row(self) -> str:
        counts = " ".join(f"{n}:{c}" for n, c in sorted(self.holdings.items()))
        return (
            f"{self.name:<7} {self.tasks:>6}  {self.first_t0} .. {self.last_t0}  "
            f"{_spread(self.pool_sizes, '.0f'):<10}  {_spread(self.cash_shares, '.0%'):<13}  {counts}"
        )


class TaskStats(BaseModel):
    """What a tasks folder holds."""

    folder: str
    manifest: Manifest
    splits: list[SplitStats]

    def to_text(self) -> str:
        m = self.manifest
        low, high = m.sampler.pool_size
        return "\n".join(
            [
                f"tasks {self.folder}  [{m.describe()}; dataset {m.dataset}, {m.universe}, seed {m.seed}, "
                f"pool {low}-{high}, {m.sampler.per_day} per day]",
                f"{'split':<7} {'tasks':>6}  {'T0 range':<24}  {'pool':<10}  {'cash share':<13}  holdings: tasks",
                *(s.row() for s in self.splits),
                "pool and cash share: min/median/max; cash share = cash / (cash + holdings at cost)",
            ]
        )


def _split_stats(name: str, tasks: list[Task]) -> SplitStats:
    if not tasks:
        raise TradeError(f"split {name} has no tasks")
    invested = [sum(n * t.cost_basis[s] for s, n in t.holdings.items()) for t in tasks]
    return SplitStats(
        name=name,
        tasks=len(tasks),
        first_t0=min(t.date for t in tasks),
        last_t0=max(t.date for t in tasks),
        pool_sizes=[len(t.pool) for t in tasks],
        holdings=dict(Counter(len(t.holdings) for t in tasks)),
        cash_shares=[t.cash / (t.cash + v) for t, v in zip(tasks, invested, strict=True)],
    )


def task_stats(folder: Path | str) -> TaskStats:
    """Statistics of each split in a tasks folder."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    splits = [_split_stats(s.name, [r.task for r in read_records(folder, s.name)]) for s in manifest.splits]
    return TaskStats(folder=str(folder), manifest=manifest, splits=splits)
