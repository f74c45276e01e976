"""trade-distill's built-in plugin: its hookspecs, the built-in filters, the swift-lora trainer, ``trade distill``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from trade_core.hookspecs import adds_hookspecs, hookimpl
from trade_distill import hookspecs

if TYPE_CHECKING:
    from trade_distill.filters import Filter
    from trade_train.trainer import Trainer


trade_addhooks = adds_hookspecs(hookspecs)


@hookimpl
def trade_register_filters(register: Callable[[Filter], None]) -> None:
    from trade_distill.builtin import BUILTIN_FILTERS

    for item in BUILTIN_FILTERS:
        register(item())


@hookimpl(optionalhook=True)  # trade-train's hook: skipped, not an error, when trade-train's plugin is disabled
def trade_register_trainers(register: Callable[[Trainer], None]) -> None:
    from trade_distill.swift_lora import SwiftLoRA

    register(SwiftLoRA())


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_distill.commands import distill_group

    register(distill_group)
