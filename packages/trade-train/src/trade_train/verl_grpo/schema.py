"""Everything verl and our code must agree on, in one place: the dataset rows, the ``extra_fields`` keys, the
agent loop's name, the reward breakdown as verl logs it, and ``compute_score``, verl's reward entry point
(``reward.custom_reward_function.path=<this file> .name=compute_score``).

Rows: one per task record of a tasks folder (:mod:`trade_reward.taskfolder`), written by the trainer into
the run folder as ``{split}.parquet``; variable-key data (the task, its ground truth) as JSON strings.

Scoring: the trading agent loop stores the final Episode in ``extra_fields[EPISODE]``, which verl merges
into ``extra_info``; the row's ``reward_model.ground_truth`` is the GroundTruth JSON, so scoring needs no
market data. Options arrive as ``+reward.custom_reward_function.reward_kwargs.scheme=continuous`` and the
like. One rule for bad input: a wrong configuration is the same for every trajectory (no Episode key in
``extra_info``: the wrong agent loop; an unknown scheme, bad settings or weights), so it raises a TradeError
naming the fix on the first call. What one trajectory holds never raises: an episode (null included) or ground
truth that cannot be read scores the scheme's failure ``malformed``, a bad number (not finite, or beyond the
bounds of :mod:`trade_tools.portfolio`) ``invalid_outcome``, each with one warning.

verl loads this file by path in its reward workers: it imports no verl and nothing heavy.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pydantic import ValidationError

from trade_core.errors import TradeError, error_line
from trade_reward.outcome import DEFAULT_WEIGHTS, INVALID, MALFORMED, Outcome, outcome
from trade_reward.schemes import get_scheme
from trade_reward.taskfolder import TaskRecord
from trade_tools.episode import Episode
from trade_tools.portfolio import impossible
from trade_tools.records import GroundTruth, Reward, parse

log = structlog.get_logger("trade.reward")

AGENT_NAME = "trading_agent"
"""The agent loop's name: in each row's ``agent_name``, ``agent_loops.yaml`` and ``default_agent_loop``."""
ABILITY = "trading"
EPISODE = "episode"
"""Key of the final Episode (JSON) in a trajectory's ``extra_fields``, and so in the reward's ``extra_info``."""
CONVERSATION = "conversation"
"""Key of the conversation (the prompt's messages, then replies and tool texts; :class:`Message` list as JSON)."""
REWARD_INFO = "reward_extra_info"
"""Key under which verl keeps :func:`compute_score`'s breakdown in ``extra_fields``."""
NO_BUCKET = -99
"""``bucket`` in verl's breakdown when the Reward has none (a failure, or a scheme without buckets): verl
keeps numbers only. ``failure`` is "" on success for the same reason. :func:`reward_from` maps both back."""
ROW_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("agent_name", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct([("index", pa.int64()), ("split", pa.string()), ("task_id", pa.string()), ("task", pa.string())]),
        ),
    ]
)
"""Fixed row types: verl reads every file alike, and an empty pool or holdings never changes a type."""


def row(record: TaskRecord) -> dict[str, object]:
    """verl's dataset row for one task record."""
    return {
        "data_source": f"trade-agent/{record.task.universe}",
        "agent_name": AGENT_NAME,
        "prompt": record.prompt,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": record.ground_truth.model_dump_json()},
        "extra_info": {
            "index": record.index,
            "split": record.split,
            "task_id": record.task.task_id,
            "task": record.task.model_dump_json(),
        },
    }


def parquet(records: Sequence[TaskRecord]) -> bytes:
    """The records as one parquet file of verl rows."""
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([row(r) for r in records], schema=ROW_SCHEMA), buffer)
    return buffer.getvalue()


def flat(reward: Reward) -> dict[str, Any]:
    """The breakdown as verl wants it: ``{"score": ..., **numbers}`` with no None values."""
    data = reward.model_dump()
    data["failure"] = data["failure"] or ""
    data["bucket"] = NO_BUCKET if data["bucket"] is None else data["bucket"]
    return data


def reward_from(score: float, breakdown: Mapping[str, Any]) -> Reward:
    """The Reward behind verl's ``score`` and its logged breakdown (:func:`flat`'s inverse)."""
    bucket = breakdown.get("bucket")
    return Reward.model_validate(
        {
            **breakdown,
            "score": score,
            "bucket": None if bucket == NO_BUCKET else bucket,
            "failure": breakdown.get("failure") or None,
        }
    )


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
    """``{"score": ..., r_new, r_orig, r_outcome, bucket, failure, scheme}`` for one trajectory."""
    chosen = get_scheme(scheme, **settings)
    horizons = _weights(weights)
    if not isinstance(extra_info, Mapping) or EPISODE not in extra_info:
        raise TradeError(
            f"extra_info has no '{EPISODE}'",
            hint="run the trading agent loop, which stores the Episode in extra_fields",
        )
    error = ""
    try:  # a null or unreadable episode is this trajectory's failure, not the batch's
        result = outcome(parse(Episode, extra_info[EPISODE]), parse(GroundTruth, ground_truth), horizons)
    except ValidationError as refused:
        result, error = Outcome.unscorable(INVALID if impossible(refused) else MALFORMED), error_line(refused)
    except TradeError as refused:
        result, error = Outcome.unscorable(MALFORMED), error_line(refused)
    if result.invalid:
        log.warning("reward_input_refused", failure=result.invalid, error=error, data_source=data_source)
    return flat(chosen.score(result))


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
