"""``trade eval dashboard``: a local web app over the run folders under --runs."""

from __future__ import annotations

from pathlib import Path

import click

from trade_core.errors import TradeError, error_line


@click.command("dashboard")
@click.option(
    "--runs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="The folder whose run folders (backtests, tasks runs, plays, training records) are shown; nothing "
    "outside it is served.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 shows it to your network)."
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="A name the browser may reach it under besides --host (and localhost), e.g. this machine's name or "
    "address with --host 0.0.0.0; repeatable. Requests for any other Host are refused (DNS rebinding).",
)
@click.option("--port", default=8501, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A dataset (trade data import) for 'Play a day'; without it the page can only read runs.",
)
def dashboard_command(runs: Path, host: str, allow_hosts: tuple[str, ...], port: int, data: Path | None) -> None:
    """Read what the agent did, in the browser: every run under --runs with its headline numbers, a backtest's
    NAV against the baselines and the CSI300, each day's or episode's conversation (reasoning folded, tool calls
    and results), portfolio before and after, orders with their accept/refuse reasons and reward; filters (losing
    days, failures by reason, tool errors, a symbol), two runs side by side, training steps with their
    trajectories, and 'Play a day'. A run still being written updates as it grows.

    \b
    trade eval dashboard --runs runs
    trade eval dashboard --runs runs --data Q --port 8600
    trade eval dashboard --runs runs --host 0.0.0.0 --allow-host research-box
    """
    from aiohttp import web

    from trade_eval.dashboard.app import allowed_hosts, make_app, started

    app = make_app(runs, data, allowed_hosts(host, allow_hosts))
    try:
        web.run_app(app, host=host, port=port, print=lambda _: click.echo(started(host, port)))
    except OSError as error:
        raise TradeError(f"cannot listen on {host}:{port}: {error_line(error)}", hint="choose another --port") from None
