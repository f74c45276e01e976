"""``trade eval report``: one self-contained HTML page (and PNG charts) over one or more backtest run folders."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trade_core.errors import TradeError, error_line

if TYPE_CHECKING:
    from trade_eval.report.runs import Run


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file; nav.png and drawdown.png are written beside it. Default: report.html in the first run folder.",
)
@click.option("--force", is_flag=True, help="Replace a report (or its charts) already there.")
def report_command(run_dirs: tuple[Path, ...], out: Path | None, force: bool) -> None:
    """Report on backtest runs: NAV against the baselines and CSI300, drawdown, metrics with their conventions,
    each day's positions, trades and conversation. Several runs are compared on the dates they all have.

    A run still being written or damaged is shown as far as it can be read, with its problems listed; a folder
    with no finished day and no summary is an error.

    \b
    trade eval report runs/trader                     # runs/trader/report.html
    trade eval report runs/trader runs/other --out compare.html
    """
    from trade_eval.report.page import chart_paths, write_report
    from trade_eval.report.runs import load_run

    started = time.perf_counter()
    runs = [load_run(path) for path in run_dirs]
    for run in runs:
        if not run.days and run.summary is None:
            raise TradeError(
                f"{run.path}: nothing to report (no finished day, no summary.json)",
                hint="name the --out folder of a trade eval backtest",
            )
    out = out or run_dirs[0] / "report.html"
    there = [path for path in (out, *chart_paths(out).values()) if path.exists()]
    if there and not force:
        raise TradeError(
            f"{there[0]} exists (an earlier report?)", hint="--force replaces it, or --out names another file"
        )
    try:
        files = write_report(runs, out)
    except OSError as error:
        raise TradeError(f"cannot write {out}: {error_line(error)}", hint="choose another --out") from None
    for run in runs:
        for problem in run.problems:
            click.echo(f"warning: {run.name}: {problem}", err=True)
    charts = ", ".join(str(p) for p in files.charts.values()) or "no charts (no NAV to draw)"
    click.echo(f"wrote {files.html} ({_what(runs)}; {charts}) in {time.perf_counter() - started:.1f}s")


def _what(runs: list[Run]) -> str:
    """``1 run, 60 days``, or how many days several runs are compared on (the dates they all have)."""
    if len(runs) == 1:
        return f"1 run, {len(runs[0].days)} days"
    common = set.intersection(*({day.date for day in run.days} for run in runs))
    return f"{len(runs)} runs compared on the {len(common)} days they all have"
