"""``trade eval report``: one self-contained HTML page (and PNG charts) over one or more backtest run folders."""

from __future__ import annotations

import time
from pathlib import Path

import click

from trade_core.errors import TradeError, error_line


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file; nav.png and drawdown.png are written beside it.",
)
def report_command(run_dirs: tuple[Path, ...], out: Path) -> None:
    """Report on backtest runs: NAV against the baselines and CSI300, drawdown, metrics with their conventions,
    each day's positions, trades and conversation. Several runs are compared on the dates they all have.

    A run still being written or damaged is shown as far as it can be read, with its problems listed.
    """
    from trade_eval.report.page import write_report
    from trade_eval.report.runs import load_run

    started = time.perf_counter()
    runs = [load_run(path) for path in run_dirs]
    try:
        files = write_report(runs, out)
    except OSError as error:
        raise TradeError(f"cannot write {out}: {error_line(error)}", hint="choose another --out") from None
    for run in runs:
        for problem in run.problems:
            click.echo(f"warning: {run.name}: {problem}", err=True)
    charts = ", ".join(str(p) for p in files.charts.values()) or "no charts (no NAV to draw)"
    days = sum(len(run.days) for run in runs)
    click.echo(f"wrote {files.html} ({len(runs)} runs, {days} days; {charts}) in {time.perf_counter() - started:.1f}s")
