"""Everything verl and our code must agree on, in one place: the dataset rows, the ``extra_fields`` keys, the
agent loop's name, the reward breakdown as verl logs it, and ``compute_score``, verl's reward entry point
(``reward.custom_reward_function.path=<this file> .name=compute_score``).

Rows: one per task record of a tasks folder (:mod:`trade_reward.taskfolder`), written by the trainer into
the run folder as ``{split}.parquet``; variable-key data (the task, its ground truth) as JSON strings.

Scoring: the trading agent loop stores the final Episode in ``extra_fields[EPISODE]``, which verl merges
into ``extra_info``; the row's ``reward_model.ground_truth`` is the GroundTruth JSON, so scoring needs no
market data. Options arrive as ``+reward.custom_reward_function.reward_kwargs.scheme=continuous`` and the
like. The scoring itself is trade-reward's (:func:`trade_reward.scoring.score_day`, bad input included); here
only a missing Episode key in ``extra_info`` (the wrong agent loop) is added to the configuration errors.

verl loads this file by path in its reward workers: it imports no verl and nothing heavy.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trade_core.errors import TradeError
from trade_reward.scoring import score_day
from trade_reward.taskfolder import TaskRecord
from trade_tools.episode import Episode
from trade_tools.grading import GroundTruth, Reward
from trade_tools.records import parse
from trade_train.rollouts import Rollout

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
    **options: Any,
) -> dict[str, Any]:
    """``{"score": ..., r_new, r_orig, r_outcome, bucket, failure, scheme}`` for one trajectory (``options``:
    :func:`~trade_reward.scoring.score_day`'s ``scheme``, ``weights`` and the scheme's settings)."""
    if not isinstance(extra_info, Mapping) or EPISODE not in extra_info:
        raise TradeError(
            f"extra_info has no '{EPISODE}'",
            hint="run the trading agent loop, which stores the Episode in extra_fields",
        )
    return flat(score_day(extra_info[EPISODE], ground_truth, source=data_source, **options))


def rollout(group: str, score: float, extra_fields: Mapping[str, Any], ground_truth: str | None = None) -> Rollout:
    """The Rollout of a trajectory's ``extra_fields`` as verl stores them after scoring, and the row's ground truth."""
    conversation = extra_fields.get(CONVERSATION) or "[]"
    return Rollout(
        group=group,
        episode=Episode.model_validate_json(extra_fields[EPISODE]),
        reward=reward_from(float(score), extra_fields.get(REWARD_INFO) or {}),
        conversation=json.loads(conversation) if isinstance(conversation, str) else conversation,
        ground_truth=None if ground_truth is None else parse(GroundTruth, ground_truth),
    )
