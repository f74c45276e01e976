"""The ``tanh`` scheme: a smooth, bounded score that weighs losing against holding more than winning.

``score = tanh(scale * r_outcome)`` for gains and ``loss_aversion * tanh(scale * r_outcome)`` for
losses, so it saturates instead of clipping (large moves still differ a little, and GRPO groups are
less often all equal than under ``bucketed``). A failed episode scores ``failure``, which must lie at
or below ``-loss_aversion``: every failure then scores below every success, as the built-ins promise.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trade_reward.outcome import Outcome
from trade_reward.schemes import Reward, RewardScheme, failure_of


class TanhSettings(BaseModel):
    """Options of ``tanh``; ``--set KEY=VALUE`` on the CLI, ``reward_kwargs`` under verl."""

    model_config = ConfigDict(extra="forbid")

    scale: float = Field(50.0, gt=0, description="score = tanh(scale * r_outcome) for gains (2% -> 0.76)")
    loss_aversion: float = Field(1.5, ge=1, description="a loss scores loss_aversion * tanh(scale * r_outcome)")
    failure: float = Field(-2.0, description="score of a failed episode (at most -loss_aversion)")

    @model_validator(mode="after")
    def _failures_score_lowest(self) -> TanhSettings:
        if self.failure > -self.loss_aversion:
            raise ValueError("failure must be <= -loss_aversion, or a failure could outscore a bad trade")
        return self


class Tanh(RewardScheme):
    """tanh(50 x r_outcome), losses x 1.5; failures -2."""

    name = "tanh"
    description = "tanh(50 * r_outcome), losses x1.5; failures -2"
    Settings = TanhSettings

    def score(self, outcome: Outcome) -> Reward:
        settings: TanhSettings = self.settings  # type: ignore[assignment]
        failure = failure_of(outcome)
        if failure:
            value = settings.failure
        else:
            value = math.tanh(settings.scale * outcome.r_outcome)
            if value < 0:
                value *= settings.loss_aversion
        return Reward(
            score=value,
            scheme=self.name,
            r_new=outcome.r_new,
            r_orig=outcome.r_orig,
            r_outcome=outcome.r_outcome,
            failure=failure,
        )
