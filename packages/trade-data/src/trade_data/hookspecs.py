"""Hooks owned by trade-data (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    import click

    from trade_data.bar_tables import BarTable
    from trade_data.sources import DataSource


@hookspec
def trade_register_data_sources(register: Callable[[DataSource], None]) -> None:
    """Register downloadable market data sources for ``trade data download --source NAME``.

    A source's ``name`` is its registry key. Added in 0.1.
    """


@hookspec
def trade_register_data_commands(register: Callable[[click.Command], None]) -> None:
    """Register extra ``trade data`` subcommands from other packages (key: the command's name).

    For commands that belong under ``trade data`` but need packages above trade-data, such as the
    task builder ``trade data tasks``. Added in 0.1.
    """


@hookspec
def trade_register_bar_tables(register: Callable[[BarTable], None]) -> None:
    """Register per-bar tables (causal functions of a symbol's bars, e.g. trade-tools' indicators) that
    ``trade data import|synth|download`` compute with the dataset, so the first read in any process finds them
    built. Added in 0.1.
    """
