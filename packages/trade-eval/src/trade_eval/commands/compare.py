"""``trade eval compare``: is one run better than another, beyond the noise of the days or tasks they share?"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trade_core.errors import TradeError
from trade_core.params import FiniteRange

if TYPE_CHECKING:
    from trade_records.runfolder import EpisodeRecord

Label = tuple[str, str, str]
"""A compared statistic: its name in the sentence, its number format, the unit after the difference."""
LABELS: dict[str, Label] = {
    "mean": ("mean daily return", "{:+.2%}", "/day"),
    "total_return": ("total return", "{:+.2%}", ""),
    "sharpe": ("Sharpe", "{:+.2f}", ""),
}


def _kind(path: Path) -> str:
    """The manifest's kind ("backtest" or "tasks"), or a one-line error for a folder that is no run."""
    from trade_records.runfolder import read_run_manifest

    try:
        return read_run_manifest(path).kind
    except TradeError as error:
        raise TradeError(
            error.message, hint="pass the --out folders of two `trade eval backtest` or two `trade eval tasks` runs"
        ) from None


def _daily_returns(path: Path) -> tuple[str, dict[str, float], dict[str, Any]]:
    """(name, daily return by date, the summary's conventions) of a run folder, from its NAVs at each close."""
    from trade_eval.report.runs import load_run
    from trade_records.runfolder import DAYS, MANIFEST

    run = load_run(path)
    initial = run.setting("initial_cash", int | float)
    if not (path / MANIFEST).is_file() or not (path / DAYS).is_file() or not initial:
        raise TradeError(
            f"{path} is not a backtest run folder (needs {MANIFEST} and {DAYS})",
            hint="pass the --out folders of two `trade eval backtest` runs",
        )
    navs = [initial, *(day.nav for day in run.days)]
    damaged = next((day for day in run.days if not math.isfinite(day.nav) or day.nav <= 0), None)
    if damaged is not None:
        raise TradeError(
            f"{path}: the NAV of {damaged.date} is {damaged.nav}, not a positive number", hint="the run is damaged"
        )
    by_date = {str(day.date): navs[i + 1] / navs[i] - 1 for i, day in enumerate(run.days)}
    return f"{run.name} ({run.policy})", by_date, run.summary.conventions if run.summary else {}


def _episodes(path: Path) -> tuple[str, list[str], dict[tuple[str, int], EpisodeRecord]]:
    """(name, the run's schemes, the record of each played (task, sample)) of a tasks run folder; lines that
    cannot be read are skipped, as the report skips them."""
    from trade_eval.report.runs import read_records
    from trade_records.runfolder import EPISODES, EpisodeRecord, TasksManifest, read_run_manifest

    manifest = read_run_manifest(path)
    assert isinstance(manifest, TasksManifest)  # _kind said so
    records = read_records(path / EPISODES, EpisodeRecord, []) if (path / EPISODES).is_file() else []
    played = {(r.task_id, r.sample): r for r in records if r.status == "done"}
    return f"{path.name} ({manifest.policy})", list(manifest.schemes), played


def verdict(label: Label, a: str, b: str, result: dict[str, Any], common: str, level: float) -> str:
    """One sentence: who beats whom, only when the interval of the difference excludes 0."""
    name, form, unit = label
    diff, ci = result["difference"], result["ci"]
    if diff is None or ci is None:
        return f"{name}: undefined on {common} (too few or no variation)"
    beats = ci[0] > 0 or ci[1] < 0
    sign = -1 if beats and diff < 0 else 1  # the winner goes first, with a positive difference
    if sign < 0:
        a, b = b, a
    lo, hi = sorted((sign * ci[0], sign * ci[1]))
    shown = f"{form.format(sign * diff)}{unit}, {level:.0%} CI [{form.format(lo)}, {form.format(hi)}], {common}"
    if beats:
        return f"{a} beats {b} on {name} ({shown})"
    return f"no difference distinguishable from noise on {name} between {a} and {b} ({shown})"


def compare_backtests(run_a: Path, run_b: Path, resamples: int, level: float, seed: int) -> dict[str, Any]:
    """Paired by date: mean daily return, total return and Sharpe, stationary bootstrap over the common days."""
    import numpy as np

    from trade_eval.metrics import Conventions
    from trade_eval.uncertainty import Bootstrap, paired_difference

    name_a, returns_a, conv = _daily_returns(run_a)
    name_b, returns_b, _ = _daily_returns(run_b)
    common = sorted(returns_a.keys() & returns_b.keys())
    if not common:
        raise TradeError(f"{run_a} and {run_b} share no finished trading day", hint="compare runs over one window")
    conventions = Conventions(
        conv.get("convention", "standard"), conv.get("trading_days_per_year"), conv.get("risk_free", 0.0)
    )
    bootstrap = Bootstrap(resamples=resamples, level=level, seed=seed)
    a, b = np.array([returns_a[d] for d in common]), np.array([returns_b[d] for d in common])
    results = paired_difference(a, b, conventions, bootstrap)
    shared = f"{len(common)} common days"
    method = f"A minus B; {bootstrap.describe(len(common))}; Sharpe over {conventions.days} d/yr"
    return {
        "a": str(run_a),
        "b": str(run_b),
        "kind": "backtest",
        "common_days": len(common),
        "first": common[0],
        "last": common[-1],
        "method": method,
        "metrics": results,
        "verdicts": [verdict(LABELS[k], name_a, name_b, r, shared, level) for k, r in results.items()],
        "header": f"A = {name_a}, B = {name_b}: {shared} {common[0]} .. {common[-1]}",
    }


def compare_tasks(run_a: Path, run_b: Path, resamples: int, level: float, seed: int) -> dict[str, Any]:
    """Paired by (task, sample): the mean reward of each scheme both runs scored. The interval resamples T0 days
    in blocks of consecutive days, each with all its tasks and samples, the same days for A and B: the tasks of
    a day share its market, and consecutive days overlap in their reward windows (:class:`Clusters`)."""
    from trade_eval.uncertainty import Bootstrap, Clusters

    name_a, schemes_a, played_a = _episodes(run_a)
    name_b, schemes_b, played_b = _episodes(run_b)
    pairs = sorted(played_a.keys() & played_b.keys())
    schemes = [s for s in schemes_a if s in schemes_b]
    if not pairs or not schemes:
        missing = "(task, sample) both runs played" if not pairs else "reward scheme"
        raise TradeError(f"{run_a} and {run_b} share no {missing}", hint="compare two runs of one tasks split")
    clusters = Clusters([played_a[p].date for p in pairs], Bootstrap(resamples=resamples, level=level, seed=seed))
    results = {
        scheme: clusters.difference(
            [played_a[p].rewards[scheme].score for p in pairs], [played_b[p].rewards[scheme].score for p in pairs]
        )
        for scheme in schemes
    }
    tasks, days = len({task for task, _ in pairs}), len(clusters.days)
    shared = f"{tasks} common tasks on {days} days, {len(pairs)} episodes"
    method = f"A minus B of the mean reward over the (task, sample) episodes both runs played; {clusters.describe()}"
    return {
        "a": str(run_a),
        "b": str(run_b),
        "kind": "tasks",
        "common_tasks": tasks,
        "common_days": days,
        "common_episodes": len(pairs),
        "method": method,
        "metrics": results,
        "verdicts": [
            verdict((f"mean reward ({s})", "{:+.4f}", ""), name_a, name_b, r, shared, level) for s, r in results.items()
        ],
        "header": f"A = {name_a}, B = {name_b}: {shared}",
    }


@click.command("compare", short_help="Compare two backtest or two tasks runs, with paired bootstrap intervals.")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--resamples", default=2000, show_default=True, type=click.IntRange(min=100), help="Bootstrap draws.")
@click.option("--level", default=0.95, show_default=True, type=FiniteRange(0, 1, min_open=True, max_open=True))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of the resampling.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_command(run_a: Path, run_b: Path, resamples: int, level: float, seed: int, as_json: bool) -> None:
    """A minus B, each difference with a paired bootstrap interval; "A beats B" is said only when the interval
    excludes 0.

    Two backtests: mean daily return, total return and Sharpe over the trading days both finished (the same
    days resampled for both: stationary bootstrap, since days are autocorrelated). Two tasks runs: the mean
    reward of each scheme both scored, over the (task, sample) episodes both played (T0 days resampled in blocks
    of consecutive days, each with all its tasks and samples).

    \b
    trade eval compare runs/trader runs/momentum
    trade eval compare runs/tasks-step200 runs/tasks-step100
    """
    kinds = _kind(run_a), _kind(run_b)
    if kinds[0] != kinds[1]:
        raise TradeError(
            f"{run_a} is a {kinds[0]} run and {run_b} a {kinds[1]} run: they cannot be paired",
            hint="compare two backtests (paired by day) or two tasks runs (paired by task)",
        )
    compare = compare_tasks if kinds[0] == "tasks" else compare_backtests
    out = compare(run_a, run_b, resamples, level, seed)
    header = out.pop("header")
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(header)
    click.echo("\n".join(out["verdicts"]))
    click.echo(f"method: {out['method']}")
