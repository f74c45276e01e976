"""The built-in filters: the distillation tutorial's three rules and exact-duplicate removal."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from trade_distill.filters import Filter, TrajectoryFilter
from trade_reward.outcome import outcome
from trade_tools.toolcalls import MARKUP
from trade_tools.trajectory import Trajectory

MALFORMED = ("错误：未知工具", "错误：参数", "错误：缺少参数", "错误：不支持的参数")
"""How the Episode's tool result starts when it refused a call before running the tool: an unknown tool,
arguments that are not JSON or not an object, or that do not fit the tool's schema."""


class MalformedCalls(TrajectoryFilter):
    name = "malformed-calls"
    description = "a call the Episode refused as malformed, or tool-call markup the server failed to parse"

    def reason(self, trajectory: Trajectory, options: Mapping[str, Any]) -> str | None:
        for message in trajectory.messages:
            if message.role == "tool" and message.content.startswith(MALFORMED):
                return "malformed tool call"
            if message.role == "assistant" and any(mark in message.content for mark in MARKUP):
                return "tool-call markup left as text"
        return None


class NotStopped(TrajectoryFilter):
    name = "not-stopped"
    description = 'the day was not ended by TakeAction(type="stop")'

    def reason(self, trajectory: Trajectory, options: Mapping[str, Any]) -> str | None:
        status = trajectory.episode.status
        return None if status == "stopped" else f"status {status}"


class NavReturn(TrajectoryFilter):
    name = "nav-return"
    description = "the final portfolio's return (the reward's r_new) is below a threshold"
    options: ClassVar[Mapping[str, Any]] = {"threshold": 0.0}

    def reason(self, trajectory: Trajectory, options: Mapping[str, Any]) -> str | None:
        if trajectory.reward is not None:
            value = trajectory.reward.r_new
        elif trajectory.ground_truth is not None:
            scored = outcome(trajectory.episode, trajectory.ground_truth)
            if scored.invalid:
                return f"return not computable ({scored.invalid})"
            value = scored.r_new
        else:
            return "no reward or ground truth"
        return "return below threshold" if value < options["threshold"] else None


class Duplicates(Filter):
    name = "duplicates"
    description = "the same conversation as an earlier trajectory (what a model is trained on)"

    def judge(self, trajectories: Sequence[Trajectory], options: Mapping[str, Any]) -> list[str | None]:
        seen: set[str] = set()
        reasons: list[str | None] = []
        for trajectory in trajectories:
            messages = [message.model_dump(mode="json") for message in trajectory.messages]
            key = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
            reasons.append("duplicate conversation" if key in seen else None)
            seen.add(key)
        return reasons


BUILTIN_FILTERS = (MalformedCalls, NotStopped, NavReturn, Duplicates)
"""Also the default rules of a run, in this order."""
