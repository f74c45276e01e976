"""Hooks owned by trade-tools (added to the manager through ``trade_addhooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trade_core.hookspecs import eventspec, hookspec

if TYPE_CHECKING:
    from trade_core.runs import RunContext
    from trade_tools.episode import Episode
    from trade_tools.portfolio import Fill
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


@eventspec
def trade_tool_called(
    episode: Episode, name: str, arguments: str | dict[str, Any] | None, answer: str, run: RunContext | None
) -> None:
    """A tool call was played (one turn of the tool loop): ``name`` and ``arguments`` as the model wrote them,
    ``answer`` the text it reads back (an error text too), ``episode`` the state after the call.

    Called after every call, in training rollouts as in evaluation, so keep it cheap (no I/O per call in a
    rollout worker); what an anonymized model saw is aliased, ``episode.reveal(answer)`` is the real text. Only
    observe: changing the episode here would make the day differ from what the model was told. ``run``: the run
    it belongs to (:mod:`trade_core.runs`; None outside one).  Added in 0.1.
    """


@eventspec(fails_closed=True)
def trade_veto_order(episode: Episode, order: Fill, run: RunContext | None) -> str | None:
    """An order is about to execute: ``order`` is its planned fill (real symbol and shares, price, fees) on
    ``episode`` before the trade; return a reason to veto it, or None to let it through.

    A vetoed order changes nothing (cash, positions and the day's actions stay as they were) and the model
    reads ``错误：订单被否决：<reason>`` as the call's answer, so write the reason in the model's language.
    Orders the rules refuse never get here. The hook fails closed: a plugin that raises vetoes the order (the
    model reads that the check failed), is logged, and is asked again on the next order; under
    ``TRADE_STRICT_PLUGINS=1`` it ends the run instead. ``run``: as for ``trade_tool_called``. Added in 0.1.
    """


@eventspec
def trade_episode_finished(episode: Episode, run: RunContext | None) -> None:
    """An Episode closed (``episode.status``: ``stopped``, ``truncated`` or ``failed``, with its
    ``status_reason``): by ``TakeAction(stop)`` (after that call's ``trade_tool_called``), a reply without a tool
    call, a turn or token budget, or a policy that could not play. Once per Episode, in the process that played it
    (a worker's ``run.role`` says so). Observe only, as for ``trade_tool_called``. Added in 0.1.
    """
