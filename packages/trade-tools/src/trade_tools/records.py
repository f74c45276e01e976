"""The typed records the packages hand each other: the task an Episode plays, and how a stored record is parsed.

They sit low in the stack, beside the Episode, so training, evaluation, distillation and the dashboard
read one format with no string agreements between packages. A :class:`~trade_tools.trajectory.Trajectory`
carries the task's grading (:mod:`trade_tools.grading`) next to its Episode; its ``version`` (and a tasks
folder's manifest) versions them on disk.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from trade_tools.portfolio import Cash, Shares

Record = TypeVar("Record", bound=BaseModel)
NOISE_LIMIT = 0.1
"""The largest ``anonymize_noise`` (a standard deviation of log levels): beyond it the bars read as noise."""


def _unset(unset: object) -> Callable[[object], bool]:
    """``exclude_if`` of a field added after tasks were first written: left out while it holds ``unset`` (by
    ``==``), so a plain task serialises as it did before (task files, verl rows, trajectories); pydantic then
    serialises the whole record natively, where a wrapping serializer built it as Python objects first."""
    return lambda value: value == unset


class Task(BaseModel):
    """One training or evaluation sample: a trading day, a stock pool, holdings and cash."""

    task_id: str
    date: dt.date
    pool: list[str] = Field(min_length=1)
    holdings: dict[str, Shares] = Field(default_factory=dict, description="initial shares, all sellable on T0")
    cost_basis: dict[str, float] = Field(default_factory=dict, description="CNY per share; default: previous close")
    cash: Cash
    universe: str = "csi300"
    index: str = "SH000001"
    anonymized: bool = Field(
        False,
        description="the model sees aliases for symbols and dates (trade_tools.anonymize)",
        exclude_if=_unset(False),
    )
    tools: list[str] | None = Field(
        None,
        description="the tools the day offers, in order; None: the Episode's default",
        exclude_if=_unset(None),
    )
    prompt_set: str | None = Field(
        None, description="how the day is put into words; None: the Episode's default", exclude_if=_unset(None)
    )
    anonymize_noise: float | None = Field(
        None,
        ge=0,
        le=NOISE_LIMIT,
        description="anonymized: sd of the shown bars' perturbation; None: the Episode's",
        exclude_if=_unset(None),
    )


def parse(model: type[Record], stored: str | Mapping[str, Any]) -> Record:
    """A record from JSON text or an already decoded object: the two ways records travel (verl, JSONL)."""
    return model.model_validate_json(stored) if isinstance(stored, str) else model.model_validate(stored)


def __getattr__(name: str) -> Any:
    """``GroundTruth`` and ``Reward`` moved to :mod:`trade_tools.grading`; users' imports from here still work."""
    if name in ("GroundTruth", "Reward"):
        warnings.warn(f"trade_tools.records.{name} is now trade_tools.grading.{name}", DeprecationWarning, stacklevel=2)
        from trade_tools import grading

        return getattr(grading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
