"""trade-distill's built-in plugin: its hookspecs, the built-in filters, the swift-lora trainer, ``trade distill``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click
import pluggy

from trade_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from trade_distill.filters import Filter
    from trade_train.trainer import Trainer


@hookimpl
def trade_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    from trade_distill import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def trade_register_filters(register: Callable[[Filter], None]) -> None:
    from trade_distill.builtin import BUILTIN_FILTERS

    for item in BUILTIN_FILTERS:
        register(item())


@hookimpl
def trade_register_trainers(register: Callable[[Trainer], None]) -> None:
    from trade_distill.swift_lora import SwiftLoRA

    register(SwiftLoRA())


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_distill.commands import distill_group

    register(distill_group)
