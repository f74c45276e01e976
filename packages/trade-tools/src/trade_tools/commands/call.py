"""``trade tools call``: one tool call as of a trading day, printed as the model would read it."""

from __future__ import annotations

import sys

import click

from trade_tools.commands.options import ANONYMIZE_NOISE, DayChoice, day_options


@click.command("call", short_help="Call one tool as of a trading day and print its text.")
@click.argument("name")
@click.option("--args", "arguments", default="{}", show_default=True, help="Arguments as a JSON object.")
@day_options
def call_command(
    name: str,
    arguments: str,
    choice: DayChoice,
) -> None:
    """Call tool NAME with --args JSON on day --date of --data, as the agent would.

    Exit status 1 when the tool answers with an error text.
    """
    episode = choice.open()
    text = episode.call(name, arguments)
    click.echo(text)
    if text.startswith("错误："):
        sys.exit(1)


call_command.params.append(ANONYMIZE_NOISE)
