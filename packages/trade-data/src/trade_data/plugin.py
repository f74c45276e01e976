"""trade-data's built-in plugin: the ``trade data`` commands, its hookspecs and bundled data sources."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from trade_core.hookspecs import adds_hookspecs, hookimpl
from trade_data import hookspecs

if TYPE_CHECKING:
    from trade_data.sources import DataSource


trade_addhooks = adds_hookspecs(hookspecs)


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_data.commands import data_group

    register(data_group)


@hookimpl
def trade_register_data_sources(register: Callable[[DataSource], None]) -> None:
    from trade_data.sources import BUILTIN_SOURCES

    for source in BUILTIN_SOURCES:
        register(source)
