"""Hooks owned by trade-reward (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    from trade_reward.schemes import RewardScheme


@hookspec
def trade_register_reward_schemes(register: Callable[[RewardScheme], None]) -> None:
    """Register reward schemes, each with its default settings (``register(MyScheme())``; key: ``MyScheme.name``).

    A scheme subclasses :class:`trade_reward.schemes.RewardScheme`: ``Settings`` (a pydantic model of
    its options) and ``score(outcome) -> Reward``. Added in 0.1.
    """
