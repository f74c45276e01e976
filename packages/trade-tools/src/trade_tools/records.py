"""The typed records the packages hand each other: a task, its ground truth and a reward's breakdown.

They sit low in the stack, beside the Episode, so training, evaluation, distillation and the dashboard
read one format with no string agreements between packages. A :class:`~trade_tools.trajectory.Trajectory`
carries both next to its Episode; its ``version`` (and a tasks folder's manifest) versions them on disk.
How a ground truth is computed stays with the market data (``trade_reward.forward``); how a reward is
computed stays with the schemes (``trade_reward.schemes``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from trade_tools.portfolio import Cash, Shares

Record = TypeVar("Record", bound=BaseModel)
NOISE_LIMIT = 0.1
"""The largest ``anonymize_noise`` (a standard deviation of log levels): beyond it the bars read as noise."""


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
    anonymized: bool = Field(False, description="the model sees aliases for symbols and dates (trade_tools.anonymize)")
    tools: list[str] | None = Field(None, description="the tools the day offers, in order; None: the Episode's default")
    prompt_set: str | None = Field(None, description="how the day is put into words; None: the Episode's default")
    anonymize_noise: float | None = Field(
        None, ge=0, le=NOISE_LIMIT, description="anonymized: sd of the shown bars' perturbation; None: the Episode's"
    )

    @model_serializer(mode="wrap")
    def _plain_unchanged(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A plain task serialises as it did before these fields existed (task files, verl rows, trajectories)."""
        data = handler(self)
        for key, unset in (("anonymized", False), ("tools", None), ("prompt_set", None), ("anonymize_noise", None)):
            if data.get(key) == unset:
                data.pop(key, None)
        return data


class GroundTruth(BaseModel):
    """What happened after T0, for one task's stocks: label data that never reaches a prompt or a tool.

    Each stock's raw close at T0 and its growth to the T+1..T+k closes on adjusted prices (dividends
    and splits do not look like losses; a suspended day keeps the last close). With it a reward needs
    no market data, which is what verl's reward workers want.
    """

    date: dt.date
    horizon_dates: list[dt.date] = Field(description="the T+1..T+k trading days")
    close: dict[str, float] = Field(description="raw close at T0 (the last close if suspended), CNY")
    growth: dict[str, list[float]] = Field(description="adjusted close at T+k / adjusted close at T0, k = 1..K")

    @model_validator(mode="after")
    def _shapes_agree(self) -> GroundTruth:
        """Every stock has a close and one growth per horizon date, so reading one cannot fail half-way."""
        if self.close.keys() != self.growth.keys():
            raise ValueError("close and growth must name the same stocks")
        if any(len(g) != len(self.horizon_dates) for g in self.growth.values()):
            raise ValueError("every growth needs one value per horizon date")
        return self


class Reward(BaseModel):
    """A score with everything that went into it (logged in training, shown by `trade reward explain`)."""

    model_config = ConfigDict(allow_inf_nan=False)  # a NaN score would poison a whole GRPO batch

    score: float
    scheme: str
    r_new: float
    r_orig: float
    r_outcome: float
    bucket: int | None = Field(None, description="the scheme's bucket; None for a failure or a scheme without")
    failure: str | None = Field(None, description="why it scored as a failure (trade_reward.schemes.FAILURES)")


def parse(model: type[Record], stored: str | Mapping[str, Any]) -> Record:
    """A record from JSON text or an already decoded object: the two ways records travel (verl, JSONL)."""
    return model.model_validate_json(stored) if isinstance(stored, str) else model.model_validate(stored)
