"""``trade data``: one module per subcommand, imported only when that subcommand is used."""

from __future__ import annotations

import importlib

import click

SUBCOMMANDS = {
    "import": "trade_data.commands.import_:import_command",
    "synth": "trade_data.commands.synth:synth_command",
    "download": "trade_data.commands.download:download_command",
    "info": "trade_data.commands.info:info_command",
}


class LazyGroup(click.Group):
    """A group whose subcommands are ``module:attribute`` strings resolved on first use."""

    def __init__(self, *args: object, lazy: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, attribute = self.lazy[cmd_name].split(":")
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, cmd_name)


class DataGroup(LazyGroup):
    """``trade data``: its own subcommands plus those other packages register for it."""

    def _contributed(self) -> dict[str, click.Command]:
        from trade_core.plugins import collect, get_manager

        found = collect(get_manager(), "trade_register_data_commands", "data command", expect=click.Command)
        return {name: provided.item for name, provided in found.items()}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._contributed()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self._contributed().get(cmd_name)


@click.group("data", cls=DataGroup, lazy=SUBCOMMANDS)
def data_group() -> None:
    """Market data: import real bars, synthesize a market, download, inspect."""
