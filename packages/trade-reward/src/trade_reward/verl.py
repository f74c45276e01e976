"""verl's reward entry point: ``reward.custom_reward_function.path=<this file> .name=compute_score``.

verl merges the agent loop's ``extra_fields`` into ``extra_info``; the trading agent loop stores the
final Episode there under ``episode``. The task's ``reward_model.ground_truth`` is the GroundTruth
JSON written by ``trade data tasks``, so scoring needs no market data. Options arrive as
``+reward.custom_reward_function.reward_kwargs.scheme=continuous`` and the like.
"""

from __future__ import annotations

from typing import Any

from trade_core.errors import TradeError
from trade_reward.forward import GroundTruth
from trade_reward.outcome import DEFAULT_WEIGHTS, outcome
from trade_reward.schemes import get_scheme
from trade_tools.episode import Episode


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | dict[str, Any],
    extra_info: dict[str, Any] | None = None,
    *,
    scheme: str = "bucketed",
    weights: tuple[float, ...] | list[float] = DEFAULT_WEIGHTS,
    **settings: Any,
) -> dict[str, Any]:
    """``{"score": ..., r_new, r_orig, r_outcome, bucket, penalty, failure, scheme}`` for one trajectory."""
    stored = (extra_info or {}).get("episode")
    if stored is None:
        raise TradeError(
            "extra_info has no 'episode'", hint="run the trading agent loop, which stores the Episode in extra_fields"
        )
    episode = Episode.model_validate_json(stored) if isinstance(stored, str) else Episode.model_validate(stored)
    truth = (
        GroundTruth.model_validate_json(ground_truth)
        if isinstance(ground_truth, str)
        else GroundTruth.model_validate(ground_truth)
    )
    result = get_scheme(scheme, **settings).score(outcome(episode, truth, tuple(float(w) for w in weights)))
    return result.flat()
