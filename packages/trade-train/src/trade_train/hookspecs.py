"""Hooks owned by trade-train (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from trade_core.hookspecs import eventspec, hookspec

if TYPE_CHECKING:
    from trade_core.runs import RunContext
    from trade_train.trainer import Trainer


@hookspec
def trade_register_trainers(register: Callable[[Trainer], None]) -> None:
    """Register trainers for ``trade train --trainer NAME`` (``register(trainer)``; key: ``trainer.name``).

    Added in 0.1.
    """


@eventspec
def trade_step_metrics(trainer: str, step: int, metrics: Mapping[str, float], run: RunContext | None) -> None:
    """A training step ended: ``metrics`` are the step's, the ``trade/...`` ones (rewards, failures, stop and
    tool-error rates, flat groups: :func:`~trade_train.rollouts.step_metrics`) and, under verl, verl's own.

    Called by both trainers (``trainer``: ``trl-grpo`` or ``verl-grpo``) once per optimizer step, in the process
    that steps (under verl, its Ray trainer process: install the plugin there too). For dashboards and
    early stopping alerts; the metrics are read-only. ``run``: the training run (``role="worker"`` in a process
    ``trade train`` launched; None for a trainer called outside a run).  Added in 0.1.
    """
