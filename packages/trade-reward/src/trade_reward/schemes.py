"""Reward schemes: an Outcome in, a score and its breakdown out. Built-ins are plugins like any other.

Failures score below every success, whatever the market did: an episode without a single valid
tool call, one truncated (turns or tokens), one that never called ``TakeAction(stop)``, and one whose
numbers or inputs could not be scored (``invalid_outcome``, ``malformed``: see :mod:`trade_reward.outcome`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trade_core.errors import TradeError, error_line
from trade_core.registry import Registry
from trade_reward import hookspecs
from trade_reward.outcome import INVALID, MALFORMED, Outcome
from trade_tools.grading import Reward

FAILURES = ("no_valid_call", "truncated", "no_stop", INVALID, MALFORMED)
"""Every failure a built-in scheme reports, as :func:`failure_of` names them."""


def failure_of(outcome: Outcome) -> str | None:
    """Why the outcome scores as a failure, or None when its return is the score."""
    if outcome.invalid:
        return outcome.invalid
    if outcome.valid_calls <= 0:
        return "no_valid_call"
    if outcome.status == "truncated":
        return "truncated"
    if not outcome.stopped:
        return "no_stop"
    return None


class RewardScheme(ABC):
    """Turns an :class:`Outcome` into a :class:`Reward`. ``settings`` are validated keyword arguments.

    Plugins register an instance with the default settings (``register(MyScheme())``), like every other item.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Settings: ClassVar[type[BaseModel]]

    def __init__(self, **settings: Any) -> None:
        try:
            self.settings = self.Settings(**settings)
        except ValidationError as error:
            valid = ", ".join(self.Settings.model_fields)
            raise TradeError(
                f"bad settings for reward scheme '{self.name}': {error_line(error)}", hint=f"settings: {valid}"
            ) from None

    @abstractmethod
    def score(self, outcome: Outcome) -> Reward: ...


SCHEMES = Registry(hookspecs.trade_register_reward_schemes, "reward scheme", RewardScheme)
"""Every reward scheme by name, each with its default settings."""


class BucketedSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    edges: tuple[float, float, float, float] = Field(
        (-0.02, -0.005, 0.005, 0.02), description="r_outcome edges between buckets -2 | -1 | 0 | 1 | 2"
    )
    failure: float = Field(-3.0, description="score of a failed episode (below every bucket)")

    @model_validator(mode="after")
    def _increasing(self) -> BucketedSettings:
        if list(self.edges) != sorted(set(self.edges)):
            raise ValueError("edges must be strictly increasing")
        return self

    @model_validator(mode="after")
    def _failures_score_lowest(self) -> BucketedSettings:
        if self.failure >= -2:
            raise ValueError("failure must be < -2, or a failure could score as much as a bad trade")
        return self


class Bucketed(RewardScheme):
    """r <= -2%: -2; -2% < r <= -0.5%: -1; |r| < 0.5%: 0; 0.5% <= r < 2%: 1; r >= 2%: 2; failures -3."""

    name = "bucketed"
    description = "discrete -2..2 from r_outcome (edges -2%, -0.5%, 0.5%, 2%); failures -3"
    Settings = BucketedSettings

    def bucket(self, r: float) -> int:
        if not math.isfinite(r):
            raise ValueError(f"r_outcome must be finite, not {r}")  # NaN fails every test below: the top bucket
        a, b, c, d = self.settings.edges  # type: ignore[attr-defined]
        if r <= a:
            return -2
        if r <= b:
            return -1
        if r < c:
            return 0
        return 1 if r < d else 2

    def score(self, outcome: Outcome) -> Reward:
        failure = failure_of(outcome)
        bucket = None if failure else self.bucket(outcome.r_outcome)
        score = self.settings.failure if failure else float(bucket)  # type: ignore[attr-defined]
        return Reward(score=score, scheme=self.name, bucket=bucket, failure=failure, **_returns(outcome))


class ContinuousSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    scale: float = Field(50.0, gt=0, description="score = clip(scale * r_outcome, -clip, clip)")
    clip: float = Field(1.0, gt=0)
    failure: float = Field(-1.5, description="score of a failed episode (below -clip)")

    @model_validator(mode="after")
    def _failures_score_lowest(self) -> ContinuousSettings:
        if self.failure >= -self.clip:
            raise ValueError("failure must be < -clip, or a failure could score as much as a bad trade")
        return self


class Continuous(RewardScheme):
    """r_outcome scaled (x50: 2% -> 1.0) and clipped to [-1, 1]; failures -1.5."""

    name = "continuous"
    description = "clip(50 * r_outcome, -1, 1); failures -1.5"
    Settings = ContinuousSettings

    def score(self, outcome: Outcome) -> Reward:
        failure = failure_of(outcome)
        s = self.settings
        value = s.failure if failure else max(-s.clip, min(s.clip, s.scale * outcome.r_outcome))  # type: ignore[attr-defined]
        return Reward(score=value, scheme=self.name, failure=failure, **_returns(outcome))


def _returns(outcome: Outcome) -> dict[str, float]:
    return {"r_new": outcome.r_new, "r_orig": outcome.r_orig, "r_outcome": outcome.r_outcome}


def get_scheme(name: str, **settings: Any) -> RewardScheme:
    """The scheme registered as ``name``, configured with ``settings``; unknown names list the valid ones."""
    return type(SCHEMES.get(name))(**settings)
