"""Hooks owned by trade-distill (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    from trade_distill.filters import Filter


@hookspec
def trade_register_filters(register: Callable[[Filter], None]) -> None:
    """Register trajectory filters for ``trade distill filter`` (``register(MyFilter())``; key: ``MyFilter.name``).

    A filter subclasses :class:`trade_distill.filters.Filter` (or ``TrajectoryFilter`` to judge one trajectory at
    a time) and gives the reason it removes each trajectory it rejects. Added in 0.1.
    """
