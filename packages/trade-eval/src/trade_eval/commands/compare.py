"""``trade eval compare``: is one backtest better than another, beyond the noise of the days they share?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from trade_core.errors import TradeError

LABELS = {"mean": ("mean daily return", "{:+.2%}", "/day"), "total_return": ("total return", "{:+.2%}", ""),
          "sharpe": ("Sharpe", "{:+.2f}", "")}  # fmt: skip
"""Each compared statistic: its name in the sentence, its number format, the unit after the difference."""


def _daily_returns(path: Path) -> tuple[str, dict[str, float], dict[str, Any]]:
    """(name, daily return by date, the summary's conventions) of a run folder, from its NAVs at each close."""
    from trade_eval.report.runs import load_run
    from trade_eval.runfolder import DAYS, MANIFEST

    run = load_run(path)
    initial = run.setting("initial_cash", int | float)
    if not (path / MANIFEST).is_file() or not (path / DAYS).is_file() or not initial:
        raise TradeError(
            f"{path} is not a backtest run folder (needs {MANIFEST} and {DAYS})",
            hint="pass the --out folders of two `trade eval backtest` runs",
        )
    navs = [initial, *(day.nav for day in run.days)]
    by_date = {str(day.date): navs[i + 1] / navs[i] - 1 for i, day in enumerate(run.days)}
    return f"{run.name} ({run.policy})", by_date, (run.summary or {}).get("conventions") or {}


def verdict(key: str, a: str, b: str, result: dict[str, Any], days: int, level: float) -> str:
    """One sentence: who beats whom on ``key``, only when the interval of the difference excludes 0."""
    label, form, unit = LABELS[key]
    diff, ci = result["difference"], result["ci"]
    if diff is None or ci is None:
        return f"{label}: undefined on {days} common days (too few days or no variation)"
    beats = ci[0] > 0 or ci[1] < 0
    sign = -1 if beats and diff < 0 else 1  # the winner goes first, with a positive difference
    if sign < 0:
        a, b = b, a
    lo, hi = sorted((sign * ci[0], sign * ci[1]))
    shown = (
        f"{form.format(sign * diff)}{unit}, {level:.0%} CI [{form.format(lo)}, {form.format(hi)}], {days} common days"
    )
    if beats:
        return f"{a} beats {b} on {label} ({shown})"
    return f"no difference distinguishable from noise on {label} between {a} and {b} ({shown})"


@click.command("compare", short_help="Compare two backtest runs day by day, with paired bootstrap intervals.")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--resamples", default=2000, show_default=True, type=click.IntRange(min=100), help="Bootstrap draws.")
@click.option("--level", default=0.95, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of the resampling.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_command(run_a: Path, run_b: Path, resamples: int, level: float, seed: int, as_json: bool) -> None:
    """Difference A minus B in mean daily return, total return and Sharpe over the trading days both runs
    finished, each with a paired bootstrap interval (the same days resampled for both: stationary
    bootstrap, since days are autocorrelated). "A beats B" is said only when the interval excludes 0.

    \b
    trade eval compare runs/trader runs/momentum
    """
    import numpy as np

    from trade_eval.metrics import Conventions
    from trade_eval.uncertainty import Bootstrap, paired_difference

    name_a, returns_a, conv = _daily_returns(run_a)
    name_b, returns_b, _ = _daily_returns(run_b)
    common = sorted(returns_a.keys() & returns_b.keys())
    if not common:
        raise TradeError(f"{run_a} and {run_b} share no finished trading day", hint="compare runs over one window")
    conventions = Conventions(conv.get("convention", "standard"), conv.get("trading_days_per_year"),
                              conv.get("risk_free", 0.0))  # fmt: skip
    bootstrap = Bootstrap(resamples=resamples, level=level, seed=seed)
    a, b = np.array([returns_a[d] for d in common]), np.array([returns_b[d] for d in common])
    results = paired_difference(a, b, conventions, bootstrap)
    sentences = [verdict(key, name_a, name_b, result, len(common), level) for key, result in results.items()]
    method = f"A minus B; {bootstrap.describe(len(common))}; Sharpe over {conventions.days} d/yr"
    if as_json:
        out = {"a": str(run_a), "b": str(run_b), "common_days": len(common), "first": common[0], "last": common[-1],
               "method": method, "metrics": results, "verdicts": sentences}  # fmt: skip
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"A = {name_a}, B = {name_b}: {len(common)} common days {common[0]} .. {common[-1]}")
    click.echo("\n".join(sentences))
    click.echo(f"method: {method}")
