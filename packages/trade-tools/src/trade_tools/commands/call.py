"""``trade tools call``: one tool call as of a trading day, printed as the model would read it."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import click

from trade_tools.commands._options import ANONYMIZE_NOISE, day_options, open_episode


@click.command("call", short_help="Call one tool as of a trading day and print its text.")
@click.argument("name")
@click.option("--args", "arguments", default="{}", show_default=True, help="Arguments as a JSON object.")
@day_options
def call_command(
    name: str,
    arguments: str,
    data: Path,
    day: dt.date,
    pool: str | None,
    holdings: str | None,
    cash: float,
    universe: str,
    seed: int,
    anonymize: bool,
    anonymize_noise: float | None,
) -> None:
    """Call tool NAME with --args JSON on day --date of --data, as the agent would.

    Exit status 1 when the tool answers with an error text.
    """
    episode = open_episode(data, day, pool, holdings, cash, universe, seed, anonymize, anonymize_noise)
    text = episode.call(name, arguments)
    click.echo(text)
    if text.startswith("错误："):
        sys.exit(1)


call_command.params.append(ANONYMIZE_NOISE)
