"""Filters decide which trajectories are worth distilling; each names why it removes one.

Filters are plugins (``trade_register_filters``). A run applies the chosen filters in order, each to what the
previous ones kept, so every removal is counted once, by the first rule that rejects it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trade_core.errors import TradeError
from trade_core.registry import Registry
from trade_distill import hookspecs
from trade_tools.trajectory import Trajectory


class Filter(ABC):
    """A rule over a whole list of trajectories (so it can compare them, as duplicate removal does)."""

    name: ClassVar[str]
    description: ClassVar[str]
    options: ClassVar[Mapping[str, Any]] = {}
    """Each option's default; a run changes them with ``--set NAME.KEY=VALUE``."""

    @abstractmethod
    def judge(self, trajectories: Sequence[Trajectory], options: Mapping[str, Any]) -> list[str | None]:
        """Why each trajectory is removed, or None to keep it: one entry per trajectory, in order."""


class TrajectoryFilter(Filter):
    """A rule that judges each trajectory alone."""

    def judge(self, trajectories: Sequence[Trajectory], options: Mapping[str, Any]) -> list[str | None]:
        return [self.reason(trajectory, options) for trajectory in trajectories]

    @abstractmethod
    def reason(self, trajectory: Trajectory, options: Mapping[str, Any]) -> str | None:
        """Why ``trajectory`` is removed, or None to keep it."""


FILTERS = Registry(hookspecs.trade_register_filters, "filter", Filter)


@dataclass
class Removed:
    """What one rule removed, by reason."""

    rule: str
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.reasons.values())


def configure(rules: Sequence[Filter], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each rule's options: its defaults with the ``--set RULE.KEY=VALUE`` settings applied (checked)."""
    chosen = {rule.name: {**rule.options} for rule in rules}
    for key, value in settings.items():
        name, _, option = key.partition(".")
        if name not in chosen:
            raise TradeError(f"--set {key}: no rule '{name}' in this run", hint=f"rules: {', '.join(chosen)}")
        defaults = chosen[name]
        if option not in defaults:
            valid = ", ".join(f"{name}.{k}" for k in defaults) or "none"
            raise TradeError(f"--set {key}: rule '{name}' has no option '{option}'", hint=f"valid: {valid}")
        default = defaults[option]
        number = isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool)
        if not number and type(value) is not type(default):
            raise TradeError(f"--set {key}={value!r}: expected a {type(default).__name__}")
        defaults[option] = float(value) if number else value
    return [chosen[rule.name] for rule in rules]


def apply(
    trajectories: Sequence[Trajectory], rules: Sequence[Filter], options: Sequence[Mapping[str, Any]]
) -> tuple[list[Trajectory], list[Removed]]:
    """The trajectories every rule keeps, in input order, and what each rule removed."""
    kept = list(trajectories)
    removed = []
    for rule, rule_options in zip(rules, options, strict=True):
        reasons = rule.judge(kept, rule_options)
        if len(reasons) != len(kept):
            raise TradeError(f"filter '{rule.name}' judged {len(reasons)} of {len(kept)} trajectories")
        removed.append(Removed(rule.name, Counter(reason for reason in reasons if reason is not None)))
        kept = [trajectory for trajectory, reason in zip(kept, reasons, strict=True) if reason is None]
    return kept, removed
