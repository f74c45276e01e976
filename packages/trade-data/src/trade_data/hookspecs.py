"""Hooks owned by trade-data (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    from trade_data.sources import DataSource


@hookspec
def trade_register_data_sources(register: Callable[[DataSource], None]) -> None:
    """Register downloadable market data sources for ``trade data download --source NAME``.

    A source's ``name`` is its registry key. Added in 0.1.
    """
