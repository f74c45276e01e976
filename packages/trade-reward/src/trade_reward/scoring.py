"""One finished day scored as training scores it, from the JSON (or decoded JSON) it travelled as.

Every trainer scores through :func:`score_day` (verl's reward entry point ``trade_train.verl_grpo.schema.
compute_score`` and the TRL trainer), so no two of them can score a day differently, and a reward plugin is
checked here without any trainer installed. One rule for bad input: a wrong configuration (an unknown scheme,
bad settings or weights) is the same for every trajectory, so it raises a TradeError naming the fix on the first
call. What one trajectory holds never raises: an episode (null included) or ground truth that cannot be read
scores the scheme's failure ``malformed``, a bad number (not finite, or beyond the bounds of
:mod:`trade_tools.portfolio`) ``invalid_outcome``, each with one warning.

It imports nothing heavy: verl loads its caller by path in every reward worker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from pydantic import ValidationError

from trade_core.errors import TradeError, error_line
from trade_reward.outcome import DEFAULT_WEIGHTS, INVALID, MALFORMED, Outcome, outcome
from trade_reward.schemes import get_scheme
from trade_tools.episode import Episode
from trade_tools.grading import GroundTruth, Reward
from trade_tools.portfolio import impossible
from trade_tools.records import parse

log = structlog.get_logger("trade.reward")


def score_day(
    episode: str | Mapping[str, Any] | None,
    ground_truth: str | Mapping[str, Any],
    *,
    scheme: str = "bucketed",
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    source: str = "",
    **settings: Any,
) -> Reward:
    """The Reward of the final Episode ``episode`` against ``ground_truth`` by the scheme named ``scheme``
    (``settings`` are the scheme's); ``source`` names the data in the warning an unreadable input gets."""
    chosen = get_scheme(scheme, **settings)
    horizons = _weights(weights)
    error = ""
    try:  # a null or unreadable episode is this trajectory's failure, not the batch's
        result = outcome(parse(Episode, episode), parse(GroundTruth, ground_truth), horizons)
    except ValidationError as refused:
        result, error = Outcome.unscorable(INVALID if impossible(refused) else MALFORMED), error_line(refused)
    except TradeError as refused:
        result, error = Outcome.unscorable(MALFORMED), error_line(refused)
    if result.invalid:
        log.warning("reward_input_refused", failure=result.invalid, error=error, data_source=source)
    return chosen.score(result)


def _weights(weights: Sequence[Any]) -> tuple[float, ...]:
    """The horizon weights as floats: at least one, each finite and >= 0, else a configuration error."""
    try:
        values = tuple(float(w) for w in weights)
    except (TypeError, ValueError):
        values = ()
    if not values or not all(0 <= w < math.inf for w in values):
        raise TradeError(
            f"bad reward weights {weights!r}: one finite number >= 0 per horizon",
            hint="weights=[0.5,0.3,0.2] (verl: +reward.custom_reward_function.reward_kwargs.weights=[0.5,0.3,0.2])",
        )
    return values
