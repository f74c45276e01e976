"""verl's reward entry point: ``reward.custom_reward_function.path=<this file> .name=compute_score``.

verl merges the agent loop's ``extra_fields`` into ``extra_info``; the trading agent loop stores the
final Episode there under ``episode``. The task's ``reward_model.ground_truth`` is the GroundTruth
JSON written by ``trade data tasks``, so scoring needs no market data. Options arrive as
``+reward.custom_reward_function.reward_kwargs.scheme=continuous`` and the like.

One rule for bad input: a wrong configuration is the same for every trajectory (no Episode in
``extra_info``: the wrong agent loop; an unknown scheme, bad settings or weights), so it raises a
TradeError naming the fix on the first call. What one trajectory holds never raises: an episode or
ground truth that cannot be read scores the scheme's failure ``malformed``, a bad number
``invalid_outcome``, each with one warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from trade_core.errors import TradeError
from trade_reward.forward import GroundTruth
from trade_reward.outcome import DEFAULT_WEIGHTS, MALFORMED, Outcome, outcome
from trade_reward.schemes import error_line, get_scheme
from trade_tools.episode import Episode

log = structlog.get_logger("trade.reward")
Model = TypeVar("Model", bound=BaseModel)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | dict[str, Any],
    extra_info: dict[str, Any] | None = None,
    *,
    scheme: str = "bucketed",
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    **settings: Any,
) -> dict[str, Any]:
    """``{"score": ..., r_new, r_orig, r_outcome, bucket, penalty, failure, scheme}`` for one trajectory."""
    chosen = get_scheme(scheme, **settings)
    horizons = _weights(weights)
    stored = extra_info.get("episode") if isinstance(extra_info, Mapping) else None
    if stored is None:
        raise TradeError(
            "extra_info has no 'episode'", hint="run the trading agent loop, which stores the Episode in extra_fields"
        )
    error = ""
    try:
        result = outcome(_read(Episode, stored), _read(GroundTruth, ground_truth), horizons)
    except (ValidationError, TradeError) as refused:
        result, error = Outcome.unscorable(MALFORMED), error_line(refused)
    if result.invalid:
        log.warning("reward_input_refused", failure=result.invalid, error=error, data_source=data_source)
    return chosen.score(result).flat()


def _weights(weights: Sequence[Any]) -> tuple[float, ...]:
    """The horizon weights as floats: at least one, each finite and >= 0, else a configuration error."""
    try:
        values = tuple(float(w) for w in weights)
    except (TypeError, ValueError):
        values = ()
    if not values or not all(0 <= w < math.inf for w in values):
        raise TradeError(
            f"bad reward weights {weights!r}: one finite number >= 0 per horizon",
            hint="+reward.custom_reward_function.reward_kwargs.weights=[0.5,0.3,0.2]",
        )
    return values


def _read(model: type[Model], stored: Any) -> Model:
    """A model from verl's JSON text or an already decoded object."""
    return model.model_validate_json(stored) if isinstance(stored, str) else model.model_validate(stored)
