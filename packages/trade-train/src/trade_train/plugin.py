"""trade-train's built-in plugin: its hookspecs, the verl-grpo trainer, ``trade train``, ``trade model`` and
``trade quickstart``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from trade_core.hookspecs import adds_hookspecs, hookimpl
from trade_train import hookspecs

if TYPE_CHECKING:
    from trade_train.trainer import Trainer


trade_addhooks = adds_hookspecs(hookspecs)


@hookimpl
def trade_register_trainers(register: Callable[[Trainer], None]) -> None:
    from trade_train.prefix_grpo.trainer import PrefixGRPO
    from trade_train.trl_grpo.trainer import TrlGRPO
    from trade_train.verl_grpo.trainer import VerlGRPO

    register(VerlGRPO())
    register(TrlGRPO())
    register(PrefixGRPO())


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_train.commands.model import model_group
    from trade_train.commands.quickstart import quickstart_command
    from trade_train.commands.train import train_group

    register(train_group)
    register(model_group)
    register(quickstart_command)
