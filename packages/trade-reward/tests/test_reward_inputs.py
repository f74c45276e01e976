"""Reward records and scheme settings refuse what would let a failure pass for a success."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from trade_core.errors import TradeError
from trade_reward.outcome import Outcome
from trade_reward.schemes import Reward, get_scheme
from trade_tools.grading import GroundTruth

NAN, INF = math.nan, math.inf
DAY = "2025-10-14"


def test_non_finite_numbers_never_reach_or_leave_a_scheme() -> None:
    with pytest.raises(ValidationError, match="finite number"):
        Outcome(r_new=NAN, r_orig=0.0, r_outcome=NAN, status="stopped", valid_calls=1, stopped=True)
    with pytest.raises(ValidationError, match="finite number"):  # a plugin's NaN score would poison the batch
        Reward(score=NAN, scheme="tanh", r_new=0.0, r_orig=0.0, r_outcome=0.0)
    with pytest.raises(ValueError, match="finite"):
        get_scheme("bucketed").bucket(NAN)  # NaN passes no comparison: it used to fall into the top bucket


def test_every_failure_scores_below_every_success_whatever_the_settings() -> None:
    for name, bad in [
        ("bucketed", {"failure": -2.0}),
        ("bucketed", {"failure": NAN}),
        ("bucketed", {"edges": (-0.02, NAN, 0.005, 0.02)}),
        ("continuous", {"failure": -0.5}),
        ("continuous", {"clip": INF}),
        ("continuous", {"scale": NAN}),
    ]:
        with pytest.raises(TradeError, match=f"bad settings for reward scheme '{name}'"):
            get_scheme(name, **bad)
    assert get_scheme("continuous", clip=2.0, failure=-2.5).settings.failure == -2.5


def test_ground_truth_shapes_must_agree() -> None:
    """Every stock has a T0 close and one growth per horizon date (an IndexError or KeyError before)."""
    good = {"date": DAY, "horizon_dates": ["2025-10-15", "2025-10-16"], "close": {"A": 1.0}, "growth": {"A": [1, 1]}}
    GroundTruth.model_validate(good)
    for bad in [{"growth": {"A": [1.0]}}, {"close": {"B": 1.0}}, {"growth": {"A": [1, 1], "B": [1, 1]}}]:
        with pytest.raises(ValidationError):
            GroundTruth.model_validate({**good, **bad})
