"""trade-reward's built-in plugin: its hookspecs, the two reward schemes, ``trade reward`` and ``trade data tasks``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from trade_core.hookspecs import adds_hookspecs, hookimpl
from trade_reward import hookspecs

if TYPE_CHECKING:
    from trade_reward.schemes import RewardScheme


trade_addhooks = adds_hookspecs(hookspecs)


@hookimpl
def trade_register_reward_schemes(register: Callable[[RewardScheme], None]) -> None:
    from trade_reward.schemes import Bucketed, Continuous

    register(Bucketed())
    register(Continuous())


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_reward.commands import reward_group

    register(reward_group)


@hookimpl(optionalhook=True)  # trade-data's hook: skipped, not an error, when trade-data's plugin is disabled
def trade_register_data_commands(register: Callable[[click.Command], None]) -> None:
    from trade_reward.commands.tasks import tasks_command

    register(tasks_command)
