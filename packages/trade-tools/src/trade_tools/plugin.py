"""trade-tools' built-in plugin: its hookspecs, the four tools, the default prompts and ``trade tools``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from trade_core.hookspecs import adds_hookspecs, hookimpl
from trade_tools import hookspecs

if TYPE_CHECKING:
    from trade_data.bar_tables import BarTable
    from trade_tools.prompts import PromptSet
    from trade_tools.tool import Tool


trade_addhooks = adds_hookspecs(hookspecs)


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    from trade_tools.commands import tools_group

    register(tools_group)


@hookimpl
def trade_register_tools(register: Callable[[Tool], None]) -> None:
    from trade_tools.builtins.alpha_factor import ComputeAlphaFactor
    from trade_tools.builtins.macro import GetMacroIndicators
    from trade_tools.builtins.price import GetPriceData
    from trade_tools.builtins.take_action import TakeAction

    for tool in (GetPriceData(), GetMacroIndicators(), ComputeAlphaFactor(), TakeAction()):
        register(tool)


@hookimpl
def trade_register_prompt_sets(register: Callable[[PromptSet], None]) -> None:
    from trade_tools.prompts import COMPACT, COMPACT_EN, DEFAULT

    register(DEFAULT)
    register(COMPACT)
    register(COMPACT_EN)


@hookimpl(optionalhook=True)  # trade-data's hook: skipped, not an error, when trade-data's plugin is disabled
def trade_register_bar_tables(register: Callable[[BarTable], None]) -> None:
    from trade_tools.indicators import INDICATOR_BANDS, INDICATOR_STATES

    register(INDICATOR_STATES)
    register(INDICATOR_BANDS)
