"""``trade data``: one module per subcommand, imported only when that subcommand is used."""

from __future__ import annotations

import click

from trade_core.cli import LazyGroup
from trade_core.registry import Registry
from trade_data import hookspecs

SUBCOMMANDS = {
    "import": "trade_data.commands.import_:import_command",
    "synth": "trade_data.commands.synth:synth_command",
    "download": "trade_data.commands.download:download_command",
    "info": "trade_data.commands.info:info_command",
}


DATA_COMMANDS = Registry(hookspecs.trade_register_data_commands, "data command", click.Command)


class DataGroup(LazyGroup):
    """``trade data``: its own subcommands plus those other packages register for it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *DATA_COMMANDS.all()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or DATA_COMMANDS.all().get(cmd_name)


@click.group("data", cls=DataGroup, lazy=SUBCOMMANDS)
def data_group() -> None:
    """Market data: import real bars, synthesize a market, download, inspect."""
