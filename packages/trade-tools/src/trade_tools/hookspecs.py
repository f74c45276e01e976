"""Hooks owned by trade-tools (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_core.hookspecs import hookspec

if TYPE_CHECKING:
    from trade_tools.prompts import PromptSet
    from trade_tools.tool import Tool


@hookspec
def trade_register_tools(register: Callable[[Tool], None]) -> None:
    """Register tools the agent can call in an Episode (``register(tool)``; key: ``tool.name``).

    A tool is stateless: everything it changes lives in the Episode it is given. Added in 0.1.
    """


@hookspec
def trade_register_prompt_sets(register: Callable[[PromptSet], None]) -> None:
    """Register prompt sets (system and user prompt renderers; key: ``prompt_set.name``). Added in 0.1."""
