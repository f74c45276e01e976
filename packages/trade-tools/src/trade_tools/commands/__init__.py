"""``trade tools``: list the tools, call one on a real day, or play a day by hand."""

from __future__ import annotations

import click

from trade_core.cli import LazyGroup

SUBCOMMANDS = {
    "list": "trade_tools.commands.list_:list_command",
    "call": "trade_tools.commands.call:call_command",
    "play": "trade_tools.commands.play:play_command",
}


@click.group("tools", cls=LazyGroup, lazy=SUBCOMMANDS)
def tools_group() -> None:
    """The agent's tools: list them, call one as of a day, or trade a day yourself."""
