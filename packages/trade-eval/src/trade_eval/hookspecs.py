"""Hooks owned by trade-eval (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    from trade_eval.policy import Policy


@hookspec
def trade_register_policies(register: Callable[[Policy], None]) -> None:
    """Register trading policies a backtest can run (``register(MyPolicy())``; key: ``MyPolicy.name``).

    A policy subclasses :class:`trade_eval.policy.Policy` and plays a day through the Episode's tools
    only, so a baseline and a model are judged by the same fills and fees. Added in 0.1.
    """
