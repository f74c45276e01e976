"""What one training step leaves behind, in our terms, whichever trainer ran it: Rollouts and trading metrics.

A :class:`Rollout` is one scored trajectory of a GRPO group; verl's trainer makes them from the ``extra_fields``
it keeps (:func:`trade_train.verl_grpo.schema.rollout`), TRL's from the day it replays. This module computes
what a GRPO run on trading days needs to watch per step, and turns Rollouts into Trajectory records.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import get_args

from pydantic import BaseModel, Field

from trade_data.store import MarketStore
from trade_reward.schemes import FAILURES
from trade_tools.episode import Episode, Status
from trade_tools.exploit import exploits
from trade_tools.grading import GroundTruth, Reward
from trade_tools.trajectory import Message, Trajectory

PREFIX = "trade/"
_PARTS = ("score", "r_new", "r_orig", "r_outcome")
"""The numbers of a Reward averaged per step (``bucket`` too, over the trajectories that have one)."""


class Rollout(BaseModel):
    """One trajectory of a step: its GRPO group (the prompt's uid), score, Episode, reward and conversation."""

    group: str
    episode: Episode
    reward: Reward
    conversation: list[Message]
    ground_truth: GroundTruth | None = Field(None, description="the row's ground truth, so records can be rescored")

    @property
    def score(self) -> float:
        return self.reward.score

    def trajectory(self, *, model: str = "", step: int | None = None) -> Trajectory:
        """The record evaluation and distillation read (`trade reward variance` rescores it by its ground truth)."""
        return Trajectory(
            task_id=self.episode.task.task_id,
            source="verl",
            model=model,
            step=step,
            episode=self.episode,
            messages=self.conversation,
            ground_truth=self.ground_truth,
            reward=self.reward,
        )


FLAT_REASONS = ("all_failed", "identical", "coarse_reward")
"""Why a group's scores are all equal: every rollout failed; every one ended with the same r_outcome (the same
trades, or none); or the returns differed and the scheme scored them alike (a bucket too wide)."""


def flat_reason(group: Sequence[Rollout]) -> str | None:
    """Which of :data:`FLAT_REASONS` leaves the group without a reward difference, or None when it has one."""
    scores = [rollout.score for rollout in group]
    if max(scores) - min(scores) > 1e-12:
        return None
    if all(rollout.reward.failure for rollout in group):
        return "all_failed"
    outcomes = [rollout.reward.r_outcome for rollout in group]
    return "identical" if max(outcomes) - min(outcomes) <= 1e-12 else "coarse_reward"


def flat_warning(metrics: dict[str, float], limit: float = 0.5) -> str | None:
    """The line a step prints when over ``limit`` of its groups teach nothing, with the reasons' shares."""
    share = metrics.get(PREFIX + "zero_variance_groups", 0.0)
    if share <= limit:
        return None
    reasons = ", ".join(
        f"{why.replace('_', ' ')} {metrics[PREFIX + 'zero_variance/' + why]:.0%}"
        for why in FLAT_REASONS
        if metrics.get(PREFIX + "zero_variance/" + why)
    )
    return f"{share:.0%} of this step's groups had no reward difference and taught nothing ({reasons})"


def step_metrics(rollouts: Sequence[Rollout], store: MarketStore | None = None) -> dict[str, float]:
    """The trading metrics of one step, named ``trade/...`` for verl's logger (console, SwanLab, ...).

    - ``reward/<part>/mean``: mean of each number of the Reward (score, r_new, r_orig, r_outcome; ``bucket``
      over the trajectories that have one, i.e. that did not fail),
    - ``failure/<kind>``: share of trajectories scored as each of the schemes' FAILURES,
    - ``stop_rate``: share that executed ``TakeAction(stop)``; ``status/<status>``: share per ended Episode status,
    - ``tool_error_rate``: tool calls answered with an error text / all tool calls,
    - ``zero_variance_groups``: share of GRPO groups (same prompt) whose scores are all equal, so their
      advantages are zero and they teach nothing this step; ``zero_variance/<reason>`` by :data:`FLAT_REASONS`,
    - ``turns/mean``, ``actions/mean`` (accepted buys and sells), ``trajectories``, ``groups``,
    - on a ``store`` with a planted signal: ``exploit_share`` (of the step's accepted buys, the share of the pool's
      top stock by the signal: :mod:`trade_tools.exploit`; absent when nothing was bought) and ``buys/mean``.
    """
    if not rollouts:
        return {}
    count = len(rollouts)
    metrics: dict[str, float] = {"trajectories": float(count)}
    rewards = [rollout.reward for rollout in rollouts]
    for part in _PARTS:
        metrics[f"reward/{part}/mean"] = math.fsum(getattr(r, part) for r in rewards) / count
    buckets = [r.bucket for r in rewards if r.bucket is not None]
    if buckets:
        metrics["reward/bucket/mean"] = sum(buckets) / len(buckets)
    failures = Counter(r.failure for r in rewards)
    metrics.update({f"failure/{kind}": failures[kind] / count for kind in FAILURES})
    statuses = Counter(rollout.episode.status for rollout in rollouts)
    metrics.update({f"status/{status}": statuses[status] / count for status in get_args(Status) if status != "open"})
    metrics["stop_rate"] = metrics["status/stopped"]
    calls = sum(rollout.episode.tool_calls for rollout in rollouts)
    errors = sum(rollout.episode.tool_errors for rollout in rollouts)
    metrics["tool_error_rate"] = errors / calls if calls else 0.0
    groups: dict[str, list[Rollout]] = defaultdict(list)
    for rollout in rollouts:
        groups[rollout.group].append(rollout)
    metrics["groups"] = float(len(groups))
    flat = Counter(why for why in map(flat_reason, groups.values()) if why)
    metrics["zero_variance_groups"] = sum(flat.values()) / len(groups)
    metrics.update({f"zero_variance/{why}": flat[why] / len(groups) for why in FLAT_REASONS})
    metrics["turns/mean"] = sum(rollout.episode.turns for rollout in rollouts) / count
    accepted = sum(a.accepted and a.type in ("buy", "sell") for r in rollouts for a in r.episode.actions)
    metrics["actions/mean"] = accepted / count
    if store is not None and store.planted_signal:
        bought = exploits((rollout.episode for rollout in rollouts), store, store.planted_signal)
        metrics["buys/mean"] = bought.buys / count
        if bought.share is not None:
            metrics["exploit_share"] = bought.share
    return {PREFIX + key: value for key, value in metrics.items()}
