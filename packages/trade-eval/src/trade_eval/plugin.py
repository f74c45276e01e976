"""trade-eval's built-in plugin: its hookspecs, the built-in policies and ``trade eval``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from trade_core.hookspecs import adds_hookspecs, hookimpl
from trade_eval import hookspecs

if TYPE_CHECKING:
    from trade_eval.policy import Policy


trade_addhooks = adds_hookspecs(hookspecs)


@hookimpl
def trade_register_policies(register: Callable[[Policy], None]) -> None:
    from trade_eval.policies import BUILTIN_POLICIES

    for policy in BUILTIN_POLICIES:
        register(policy())


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_eval.commands import eval_group

    register(eval_group)
