"""trade-data's built-in plugin: the ``trade data`` commands, its hookspecs and bundled data sources."""

from __future__ import annotations

from collections.abc import Callable

import click
import pluggy

from trade_core.hookspecs import hookimpl


@hookimpl
def trade_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    from trade_data import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_data.commands import data_group

    register(data_group)
