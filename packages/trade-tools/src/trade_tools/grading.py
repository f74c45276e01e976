"""How a day is graded: what happened after T0 (:class:`GroundTruth`) and the score with its parts (:class:`Reward`).

Label data: no prompt or tool reads it, so it sits apart from the task the Episode plays
(:mod:`trade_tools.records`) and no module an Episode is built from imports this one. A
:class:`~trade_tools.trajectory.Trajectory` carries both beside its Episode. How a ground truth is computed stays
with the market data (``trade_reward.forward``); how a reward is computed stays with the schemes
(``trade_reward.schemes``).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
