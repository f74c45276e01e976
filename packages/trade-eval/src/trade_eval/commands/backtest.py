"""``trade eval backtest``: play a policy over many trading days with one portfolio, then print its metrics."""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from pydantic import BaseModel

from trade_core.errors import TradeError
from trade_core.params import ISO_DATE, FiniteRange, grouped
from trade_eval.commands import runs
from trade_tools.commands.options import noise_of
from trade_tools.limits import MAX_TURNS

if TYPE_CHECKING:
    from trade_eval.metrics import Conventions
    from trade_eval.settings import RunSettings


class BacktestPlan(BaseModel):
    """What is played: the dataset, the days, the portfolio's start, the pool and what each day shows."""

    data: Path
    start_date: dt.date
    num_days: int
    initial_cash: float
    pool_size: int | None
    pool_file: Path | None
    universe: str
    max_turns: int
    anonymize: bool
    anonymize_noise: float | None


class RunOptions(BaseModel):
    """How the run is recorded: its folder, resumed or not, over how many seeds, with the model's cutoff."""

    out: Path | None
    resume: bool
    seeds: int
    model_cutoff: str | None


def _pool_file(path: Path) -> list[str]:
    if not path.is_file():
        raise TradeError(f"--pool-file {path}: no such file")
    symbols = [s.upper() for s in re.split(r"[\s,]+", path.read_text(encoding="utf-8")) if s]
    if not symbols:
        raise TradeError(f"--pool-file {path} lists no symbols", hint="e.g. SH600519,SZ000001 or one per line")
    return symbols


@click.command("backtest", short_help="Backtest a policy over many trading days beside the baselines and CSI300.")
@runs.run_options
@click.option("--base-url", help="OpenAI-compatible server of the llm policy, e.g. http://127.0.0.1:8001/v1.")
@click.option("--data", required=True, type=click.Path(path_type=Path), help="Dataset folder (trade data import).")
@click.option("--start-date", required=True, type=ISO_DATE, help="First trading day (or the next one after it).")
@click.option("--num-days", default=60, show_default=True, type=click.IntRange(min=1), help="Trading days to play.")
@click.option(
    "--initial-cash",
    default=1_000_000.0,
    show_default=True,
    type=FiniteRange(min=0, min_open=True),
    help="CNY at the close before the first day; the run starts in cash.",
)
@click.option("--pool-size", type=click.IntRange(min=1), help="Stocks drawn for the pool on the first day [20].")
@click.option("--pool-file", type=click.Path(path_type=Path), help="The pool's symbols (comma or line separated).")
@click.option("--universe", default="csi300", show_default=True, help="Universe the pool is drawn from.")
@click.option(
    "--max-turns",
    default=MAX_TURNS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Assistant replies a day allows before it is truncated.",
)
@click.option(
    "--seeds",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Runs with seeds --seed, --seed+1, ... (the model's sampling, the random policy's draws; same pool), "
    "each in --out/seed-<s>; prints each metric as mean ± sd over them (--out/seeds.json).",
)
@click.option(
    "--out", type=click.Path(path_type=Path), help="Run folder [runs/<model or policy>-<start>-<days>d-seed<seed>]."
)
@click.option("--resume", is_flag=True, help="Continue the run in --out after its last finished day (same flags).")
@click.option(
    "--convention",
    type=click.Choice(["standard", "qlib"]),
    default="standard",
    show_default=True,
    help="Metrics: geometric (standard) or Qlib's risk_analysis (summed returns, 238 days).",
)
@click.option(
    "--trading-days",
    type=click.IntRange(min=1),
    help="Trading days per year for annualised figures [252; 238 with --convention qlib].",
)
@click.option("--risk-free", default=0.0, show_default=True, type=float, help="Annual risk-free rate for Sharpe.")
@grouped(
    plan=BacktestPlan,
    conventions="trade_eval.metrics:Conventions",
    run=RunOptions,
)
def backtest_command(
    policy_name: str, settings: RunSettings, plan: BacktestPlan, conventions: Conventions, run: RunOptions
) -> None:
    """Play --num-days trading days from --start-date with one portfolio carried from close to close:
    each day a fresh conversation on the training Episode (same tools, prompts, rules and fills), the
    portfolio of the previous close as its holdings, dividends settled in cash.

    Days run one after the other, since each starts from the previous day's portfolio: to use a server
    fully, run several seeds or models side by side. A day the server cannot answer (after retries) is
    recorded as failed with its reason and the portfolio held; the run goes on. Each finished day is
    appended to --out (trajectories.jsonl, days.jsonl); --resume continues a killed run.

    The end prints the policy's metrics beside hold, equal-weight, momentum and the CSI300 over the same
    days, with their conventions (also in summary.json).

    \b
    trade eval backtest --base-url http://127.0.0.1:8001/v1 --model trader_agent \\
        --start-date 2025-06-20 --num-days 60 --initial-cash 1000000 --temperature 0.7 --data Q
    trade eval backtest --policy momentum --start-date 2025-06-20 --data Q
    """
    from trade_data.store import MarketStore
    from trade_eval.backtest import Backtest, new_manifest, run_backtest, run_seeds
    from trade_eval.metrics import spread_lines, table_lines
    from trade_records.runfolder import SEEDS

    if plan.pool_size is not None and plan.pool_file is not None:
        raise TradeError("--pool-size and --pool-file exclude each other", hint="pass one of them")
    policy = runs.checked_policy(policy_name, settings)
    store = MarketStore.load(plan.data)
    settings = policy.for_data(settings, store)
    backtest = Backtest(
        store,
        plan.start_date,
        plan.num_days,
        initial_cash=plan.initial_cash,
        pool_size=plan.pool_size or 20,
        pool=_pool_file(plan.pool_file) if plan.pool_file else None,
        universe=plan.universe,
        seed=settings.seed,
        max_turns=plan.max_turns,
        anonymize=plan.anonymize,
        anonymize_noise=noise_of(plan.anonymize, plan.anonymize_noise),
    )
    manifest = new_manifest(
        backtest,
        policy_name,
        settings,
        command=["trade", *sys.argv[1:]],
        data=plan.data,
        pool_file=plan.pool_file,
        pool_size=plan.pool_size or 20,
        policy_dist=runs.policy_dist(policy_name),
    )
    runs.run_manifest(manifest, run.model_cutoff, backtest.dates[0])
    label = runs.run_label(policy_name, settings.model, plan.anonymize)
    out = run.out or Path("runs") / f"{label}-{plan.start_date}-{plan.num_days}d-seed{settings.seed}"
    days = f"{len(backtest.dates)} days {backtest.dates[0]} .. {backtest.dates[-1]}, policy {policy_name}"
    if run.seeds > 1:
        spread = run_seeds(
            backtest, policy, settings, out, manifest, run.seeds, resume=run.resume, conventions=conventions
        )
        click.echo(f"\n{out}: {days}, {run.seeds} seeds (pool drawn with seed {settings.seed}); {out / SEEDS}\n")
        click.echo("\n".join(spread_lines(spread)))
        failed = spread["rows"][policy_name]["failed_days"]["values"]
        runs.refuse_nothing_played(sum(failed), run.seeds * len(backtest.dates), "days", out)
        return
    summary = run_backtest(backtest, policy, settings, out, manifest, resume=run.resume, conventions=conventions)
    click.echo(f"\n{out}: {days}")
    conv = summary.conventions
    click.echo(
        f"conventions: {conv['start']}; annualised over {conv['trading_days_per_year']} trading days a year "
        f"({conventions.convention}: returns {'summed, as Qlib' if conv['mode'] == 'sum' else 'compounded'}); "
        f"risk-free {conventions.risk_free:.2%}/yr; fills at the close with the Episode's fees and slippage\n"
    )
    click.echo("\n".join(table_lines(summary)))
    failures = summary.rows[policy_name].get("failure_reasons") or {}
    for reason, count in failures.items():
        click.echo(f"failed {count} day(s): {reason}")
    runs.refuse_nothing_played(summary.rows[policy_name]["failed_days"], len(backtest.dates), "days", out)
