"""trade-reward-tanh: registers the ``tanh`` reward scheme with trade-agent.

This module is what the ``trade`` entry point names, so every ``trade`` process and verl reward
worker imports it; the scheme itself (and with it numpy, pandas and the market store) is imported
only when the hook is called. ``optionalhook=True`` keeps ``trade`` working when trade-reward's own
plugin, which defines the hook, is disabled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core import hookimpl

if TYPE_CHECKING:
    from trade_reward.schemes import RewardScheme


@hookimpl(optionalhook=True)
def trade_register_reward_schemes(register: Callable[[RewardScheme], None]) -> None:
    from trade_reward_tanh.scheme import Tanh

    register(Tanh())  # with its default settings; `--set` and verl's reward_kwargs configure others
