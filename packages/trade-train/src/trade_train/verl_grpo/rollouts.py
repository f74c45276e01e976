"""What one verl training step leaves behind, in our terms: Trajectory records and the step's trading metrics.

verl keeps each trajectory's ``extra_fields`` (our Episode and conversation, as JSON, plus the reward
breakdown verl adds as ``reward_extra_info``) next to its score. This module turns those plain values into
:class:`Rollout` objects and computes what a GRPO run on trading days needs to watch per step. It imports
no verl, so it is tested and used without it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from trade_reward.schemes import FAILURES
from trade_tools.episode import Episode
from trade_tools.trajectory import FunctionCall, Message, ToolCall, Trajectory

EPISODE = "episode"
"""Key of the Episode in a trajectory's ``extra_fields`` (and, as JSON, in the reward's ``extra_info``)."""
CONVERSATION = "conversation"
"""Key of the conversation (the prompt's messages, then replies and tool texts; :class:`Message` list as JSON)."""
PREFIX = "trade/"
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


class Rollout(BaseModel):
    """One trajectory of a step: its GRPO group (the prompt's uid), score, Episode, reward and conversation."""

    group: str
    score: float
    episode: Episode
    reward: dict[str, Any]
    conversation: list[Message]
    ground_truth: str | None = Field(None, description="the row's GroundTruth JSON, so records can be rescored")

    @classmethod
    def from_fields(
        cls, group: str, score: float, extra_fields: Mapping[str, Any], ground_truth: str | None = None
    ) -> Rollout:
        """From a trajectory's ``extra_fields`` as verl stores them after scoring."""
        conversation = extra_fields.get(CONVERSATION) or "[]"
        return cls(
            group=group,
            score=float(score),
            episode=Episode.model_validate_json(extra_fields[EPISODE]),
            reward=dict(extra_fields.get("reward_extra_info") or {}),
            conversation=json.loads(conversation) if isinstance(conversation, str) else conversation,
            ground_truth=ground_truth,
        )

    def trajectory(self, *, model: str = "", step: int | None = None) -> Trajectory:
        """The record evaluation and distillation read."""
        reward = {"score": self.score, **self.reward}
        if step is not None:
            reward["step"] = step
        if self.ground_truth is not None:
            reward["ground_truth"] = self.ground_truth  # `trade reward variance` rescores from it
        return Trajectory(
            task_id=self.episode.task.task_id,
            source="verl",
            model=model,
            episode=self.episode,
            messages=self.conversation,
            reward=reward,
        )


def step_metrics(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """The trading metrics of one step, named ``trade/...`` for verl's logger (console, SwanLab, ...).

    - ``reward/<part>/mean``: mean of each number in the reward breakdown (score, r_new, r_orig, r_outcome,
      penalty; ``bucket`` over the trajectories that have one, i.e. that did not fail),
    - ``failure/<kind>``: share of trajectories scored as that failure (no_valid_call, truncated, no_stop, and
      invalid_outcome or malformed when an Episode or ground truth holds bad numbers or cannot be read),
    - ``stop_rate``: share that executed ``TakeAction(stop)``; ``status/<status>``: share per Episode status,
    - ``tool_error_rate``: tool calls answered with an error text / all tool calls,
    - ``zero_variance_groups``: share of GRPO groups (same prompt) whose scores are all equal, so their
      advantages are zero and they teach nothing this step,
    - ``turns/mean``, ``actions/mean`` (accepted buys and sells), ``trajectories``, ``groups``.
    """
    if not rollouts:
        return {}
    count = len(rollouts)
    metrics: dict[str, float] = {"trajectories": float(count)}
    parts: dict[str, list[float]] = defaultdict(list)
    for rollout in rollouts:
        parts["score"].append(rollout.score)
        for key, value in rollout.reward.items():
            if key == "score" or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if key == "bucket" and rollout.reward.get("failure"):
                continue  # failed trajectories carry a sentinel, not a bucket
            parts[key].append(float(value))
    metrics.update({f"reward/{key}/mean": math.fsum(values) / len(values) for key, values in parts.items()})
    failures = Counter(str(rollout.reward.get("failure") or "") for rollout in rollouts)
    metrics.update({f"failure/{kind}": failures[kind] / count for kind in FAILURES})
    statuses = Counter(rollout.episode.status for rollout in rollouts)
    metrics.update({f"status/{status}": statuses[status] / count for status in ("stopped", "truncated", "failed")})
    metrics["stop_rate"] = metrics["status/stopped"]
    calls = sum(rollout.episode.tool_calls for rollout in rollouts)
    errors = sum(rollout.episode.tool_errors for rollout in rollouts)
    metrics["tool_error_rate"] = errors / calls if calls else 0.0
    groups: dict[str, list[float]] = defaultdict(list)
    for rollout in rollouts:
        groups[rollout.group].append(rollout.score)
    metrics["groups"] = float(len(groups))
    metrics["zero_variance_groups"] = sum(max(s) - min(s) <= 1e-12 for s in groups.values()) / len(groups)
    metrics["turns/mean"] = sum(rollout.episode.turns for rollout in rollouts) / count
    accepted = sum(a.accepted and a.type in ("buy", "sell") for r in rollouts for a in r.episode.actions)
    metrics["actions/mean"] = accepted / count
    return {PREFIX + key: value for key, value in metrics.items()}


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` of a Qwen3 reply: a leading ``<think>...</think>`` block is the reasoning."""
    found = _THINK.match(text)
    if found is None:
        return None, text.strip()
    return found.group(1).strip(), text[found.end() :].strip()


def reply_message(content: str, calls: Iterable[tuple[str, str]], turn: int) -> Message:
    """An assistant message from a reply's text (tool calls already cut out) and its ``(name, raw arguments)``."""
    reasoning, answer = split_reasoning(content)
    tool_calls = [
        ToolCall(id=f"call_{turn}_{i}", function=FunctionCall(name=name, arguments=arguments))
        for i, (name, arguments) in enumerate(calls)
    ]
    return Message(role="assistant", content=answer, reasoning_content=reasoning, tool_calls=tool_calls or None)
