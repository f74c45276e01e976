"""A training step's trading metrics, with their keys named once: what trainers log, write and readers read.

Every trainer (verl, trl-grpo) computes a step's :class:`StepMetrics` from the step's :class:`Played` rollouts
with :meth:`StepMetrics.of`; the loggers (verl's console, SwanLab, ...) and the ``trade_step_metrics`` event get
them flat, as ``trade/...`` keys (:meth:`StepMetrics.flat`); a run folder's ``metrics.jsonl`` holds one
:class:`MetricsLine` per step (:func:`append_metrics`, :func:`read_metrics`). No other module spells a key.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trade_core.files import append_line, read_jsonl
from trade_records.runfolder import METRICS
from trade_reward.schemes import FAILURES
from trade_tools.episode import Status
from trade_tools.grading import Reward

PREFIX = "trade/"
PARTS = ("score", "r_new", "r_orig", "r_outcome")
"""The numbers of a Reward averaged per step (``bucket`` too, over the rollouts that have one)."""
FLAT_REASONS = ("all_failed", "identical", "coarse_reward")
"""Why a group's scores are all equal: every rollout failed; every one ended with the same r_outcome (the same
trades, or none); or the returns differed and the scheme scored them alike (a bucket too wide)."""
TRL_CLIPPED = "trl/completions/clipped_ratio"
"""TRL's share of a step's completions whose last token is no end of turn (cut by the token budget, or ended on a
tool text because the budget left no room for the next reply): a trainer's own figure a metrics line keeps."""
ENDED: tuple[str, ...] = tuple(status for status in get_args(Status) if status != "open")


class Played(NamedTuple):
    """What a step's metrics need of one scored rollout: its GRPO group (the prompt's uid, or its task) and how its
    Episode ended. Trainers make it from their rollouts, the dashboard from a step's trajectory lines."""

    group: str
    reward: Reward
    status: str
    turns: int
    tool_calls: int
    tool_errors: int
    trades: int
    """Accepted buys and sells."""


def _key(pattern: str, **default: Any) -> Any:
    """A field's key in a flat metrics mapping (after ``trade/``); ``{}`` stands for each key of a dict field."""
    return Field(json_schema_extra={"key": pattern}, **default)


class StepMetrics(BaseModel):
    """One step's trading metrics. A field is None where the step could not know it (a derived step without
    exploit figures, a market without a planted signal)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a NaN never reaches a report's mean

    trajectories: int = _key("trajectories")
    groups: int | None = _key("groups", default=None)
    reward: dict[str, float] = _key("reward/{}/mean", default_factory=dict)
    """Mean of each Reward number by :data:`PARTS` (and ``bucket``)."""
    failure: dict[str, float] = _key("failure/{}", default_factory=dict)
    """Share of rollouts scored as each of the schemes' FAILURES."""
    status: dict[str, float] = _key("status/{}", default_factory=dict)
    """Share of rollouts per ended Episode status."""
    stop_rate: float = _key("stop_rate")
    """Share that executed ``TakeAction(stop)``."""
    tool_error_rate: float = _key("tool_error_rate")
    """Tool calls answered with an error text / all tool calls."""
    zero_variance_groups: float | None = _key("zero_variance_groups", default=None)
    """Share of GRPO groups whose scores are all equal, so they teach nothing this step."""
    zero_variance: dict[str, float] = _key("zero_variance/{}", default_factory=dict)
    """That share by :data:`FLAT_REASONS`."""
    turns: float | None = _key("turns/mean", default=None)
    actions: float | None = _key("actions/mean", default=None)
    """Accepted buys and sells per rollout."""
    buys: float | None = _key("buys/mean", default=None)
    """Accepted buys per rollout (on a market with a planted signal)."""
    exploit_share: float | None = _key("exploit_share", default=None)
    """Of the step's accepted buys, the share of the pool's top stock by the planted signal."""

    @classmethod
    def of(cls, played: Sequence[Played], exploits: tuple[int, float | None] | None = None) -> StepMetrics | None:
        """The metrics of a step's rollouts (None for none); ``exploits``: the step's accepted buys and the share
        of them that bought the planted signal's top stock (:mod:`trade_tools.exploit`), on such a market."""
        if not played:
            return None
        count = len(played)
        rewards = [p.reward for p in played]
        means = {part: math.fsum(getattr(r, part) for r in rewards) / count for part in PARTS}
        if buckets := [r.bucket for r in rewards if r.bucket is not None]:
            means["bucket"] = sum(buckets) / len(buckets)
        failures, statuses = Counter(r.failure for r in rewards), Counter(p.status for p in played)
        calls = sum(p.tool_calls for p in played)
        groups: dict[str, list[Played]] = defaultdict(list)
        for p in played:
            groups[p.group].append(p)
        flat = Counter(why for why in map(flat_reason, groups.values()) if why)
        return cls(
            trajectories=count,
            groups=len(groups),
            reward=means,
            failure={kind: failures[kind] / count for kind in FAILURES},
            status={status: statuses[status] / count for status in ENDED},
            stop_rate=statuses["stopped"] / count,
            tool_error_rate=sum(p.tool_errors for p in played) / calls if calls else 0.0,
            zero_variance_groups=sum(flat.values()) / len(groups),
            zero_variance={why: flat[why] / len(groups) for why in FLAT_REASONS},
            turns=sum(p.turns for p in played) / count,
            actions=sum(p.trades for p in played) / count,
            buys=exploits[0] / count if exploits else None,
            exploit_share=exploits[1] if exploits else None,
        )

    def flat(self) -> dict[str, float]:
        """``{"trade/<key>": value}``, as loggers and the ``trade_step_metrics`` event take them (None left out)."""
        out: dict[str, float] = {}
        for name, value in self:
            pattern = _pattern(name)
            if isinstance(value, dict):
                out.update({PREFIX + pattern.format(key): float(v) for key, v in value.items()})
            elif value is not None:
                out[PREFIX + pattern] = float(value)
        return out

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> StepMetrics | None:
        """The metrics in a flat mapping (a logger's line, verl's metrics dict); None where it has none of ours,
        or one of them is no finite number."""
        fields: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            pattern = _pattern(name)
            if "{}" in pattern:
                found = re.compile(re.escape(PREFIX + pattern).replace(r"\{\}", "(.+)") + "$")
                fields[name] = {m.group(1): v for k, v in flat.items() if (m := found.match(k))}
            elif PREFIX + pattern in flat:
                fields[name] = flat[PREFIX + pattern]
            elif info.is_required():
                return None
        try:
            return cls.model_validate(fields)
        except ValidationError:  # a value that is no finite number: not a line to read
            return None

    def flat_warning(self, limit: float = 0.5) -> str | None:
        """The line a step prints when over ``limit`` of its groups teach nothing, with the reasons' shares."""
        share = self.zero_variance_groups or 0.0
        if share <= limit:
            return None
        reasons = ", ".join(
            f"{why.replace('_', ' ')} {self.zero_variance[why]:.0%}"
            for why in FLAT_REASONS
            if self.zero_variance.get(why)
        )
        return f"{share:.0%} of this step's groups had no reward difference and taught nothing ({reasons})"


def _pattern(name: str) -> str:
    return StepMetrics.model_fields[name].json_schema_extra["key"]  # type: ignore[index]


def flat_reason(group: Sequence[Played]) -> str | None:
    """Which of :data:`FLAT_REASONS` leaves the group without a reward difference, or None when it has one."""
    scores = [p.reward.score for p in group]
    if max(scores) - min(scores) > 1e-12:
        return None
    if all(p.reward.failure for p in group):
        return "all_failed"
    outcomes = [p.reward.r_outcome for p in group]
    return "identical" if max(outcomes) - min(outcomes) <= 1e-12 else "coarse_reward"


class MetricsLine(BaseModel):
    """One line of a run's ``metrics.jsonl``: the step, our metrics, and the trainer's own figures by their own
    names (``trl/completions/clipped_ratio``: TRL's share of completions cut without an end of turn)."""

    step: int
    metrics: StepMetrics
    trainer: dict[str, float] = Field(default_factory=dict)

    def text(self) -> str:
        """The line as written: flat, ``{"step": N, "trade/...": ..., <trainer's keys>}``."""
        return json.dumps({"step": self.step, **self.metrics.flat(), **self.trainer})

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> MetricsLine | None:
        """A line read back (None for one without a step or without our metrics)."""
        step, metrics = flat.get("step"), StepMetrics.from_flat(flat)
        if not isinstance(step, int) or metrics is None:
            return None
        trainer = {
            k: float(v)
            for k, v in flat.items()
            if "/" in k
            and not k.startswith(PREFIX)
            and isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
        }
        return cls(step=step, metrics=metrics, trainer=trainer)


def append_metrics(run_dir: Path, line: MetricsLine) -> None:
    """Append a step's line to the run's ``metrics.jsonl`` (one fsynced write)."""
    append_line(Path(run_dir) / METRICS, line.text())


def read_metrics(run_dir: Path) -> list[MetricsLine]:
    """A run's metrics lines in step order; a line still being written, or not ours, is left out."""
    lines = (MetricsLine.from_flat(value) for value in read_jsonl(Path(run_dir) / METRICS))
    return [line for line in lines if line is not None]
