"""Hooks owned by trade-train (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    from trade_train.trainer import Trainer


@hookspec
def trade_register_trainers(register: Callable[[Trainer], None]) -> None:
    """Register trainers for ``trade train --trainer NAME`` (``register(trainer)``; key: ``trainer.name``).

    Added in 0.1.
    """
