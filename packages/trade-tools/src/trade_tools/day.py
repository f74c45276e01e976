"""A trading day played reply by reply: the one lifecycle around an Episode, whoever plays it.

The Episode is the day's state and the only way tools change it; a :class:`TradingDay` is how the day
is played: each assistant reply counted as a turn against the turn budget, the budgets the caller
measures itself (tokens, verl's tool turns) reported to it, the end reasons in the model's language, and
the conversation kept as :class:`~trade_tools.trajectory.Message` objects (reasoning apart from the answer,
tool-call arguments as written, tool texts) for :meth:`TradingDay.to_trajectory`. verl's agent loop,
``trade tools play``, ``trade reward explain`` and the backtest all play days through it, so a day ends
the same way wherever it is played.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trade_core.plugins import TradePluginManager
from trade_data.store import MarketStore
from trade_tools.episode import Episode, EpisodeSettings, Status, Task
from trade_tools.rules import ExecutionRules
from trade_tools.text import say, speaking
from trade_tools.trajectory import FunctionCall, Message, ToolCall, Trajectory

_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` of a Qwen3 reply: a leading ``<think>...</think>`` block is the reasoning."""
    found = _THINK.match(text)
    if found is None:
        return None, text.strip()
    return found.group(1).strip(), text[found.end() :].strip()


class TradingDay:
    """One Episode played turn by turn, with its conversation.

    Callers that run the tool calls themselves (verl) report each :meth:`reply`, the texts its calls got
    (:meth:`answer`) and :meth:`end_turn`; everyone else plays a whole turn with :meth:`turn`.
    """

    def __init__(self, episode: Episode, prompt: Iterable[Message | Mapping[str, Any]] | None = None) -> None:
        """``prompt``: the messages the model saw first, if not the Episode's own system and user messages."""
        self.episode = episode
        self.messages = [Message.model_validate(m) for m in (episode.messages() if prompt is None else prompt)]
        self.replies = 0
        """Replies recorded, the day's turns and any after its end: call ids are ``call_{reply}_{index}``."""

    @classmethod
    def start(
        cls,
        task: Task,
        store: MarketStore,
        *,
        rules: ExecutionRules | None = None,
        settings: EpisodeSettings | None = None,
        manager: TradePluginManager | None = None,
    ) -> TradingDay:
        """Open ``task`` on ``store`` (:meth:`Episode.start`) with the Episode's own prompt."""
        return cls(Episode.start(task, store, rules=rules, settings=settings, manager=manager))

    @property
    def is_open(self) -> bool:
        return self.episode.status == "open"

    def reply(self, content: str, calls: Sequence[tuple[str, str]] = ()) -> list[ToolCall]:
        """Record an assistant reply, counted as a turn while the day is open, and return its calls with ids.

        ``content`` is the reply's text without its tool calls; ``calls`` are ``(name, arguments as written)``.
        """
        if self.is_open:
            self.episode.turns += 1
        self.replies += 1
        reasoning, answer = split_reasoning(content)
        tool_calls = [
            ToolCall(id=f"call_{self.replies}_{i}", function=FunctionCall(name=name, arguments=arguments))
            for i, (name, arguments) in enumerate(calls)
        ]
        self.messages.append(
            Message(role="assistant", content=answer, reasoning_content=reasoning, tool_calls=tool_calls or None)
        )
        return tool_calls

    def answer(self, call: ToolCall, text: str) -> None:
        """Record the text a call got."""
        self.messages.append(Message(role="tool", content=text, tool_call_id=call.id, name=call.function.name))

    def end_turn(self) -> bool:
        """After a reply's calls ran: a day still open after its last allowed reply is truncated.

        Every one of ``max_turns`` replies may act (the prompt says so). Returns whether the day goes on.
        """
        limit = self.episode.settings.max_turns
        if self.is_open and self.episode.turns >= limit:
            self._end("truncated", f"超过{limit}轮仍未停止", f"reply limit of {limit} reached without a stop")
        return self.is_open

    def turn(self, content: str, calls: Sequence[tuple[str, str]]) -> list[str]:
        """One whole turn: the reply, its calls run on the Episode in order, their texts (returned) and the
        turn's end. A reply without a call ends the day as failed, as it does in training."""
        texts = []
        for call in self.reply(content, calls):
            texts.append(self.episode.call(call.function.name, call.function.arguments))
            self.answer(call, texts[-1])
        if not calls:
            self.no_call()
        self.end_turn()
        return texts

    # -- the ends the caller measures ------------------------------------------------------------

    def no_call(self) -> None:
        """The reply made no tool call (or none that could be parsed): the day ends unstopped."""
        self._end("failed", "回复中没有工具调用", "the reply made no tool call")

    def out_of_tokens(self, budget: int) -> None:
        """The replies and tool texts reached the caller's token budget."""
        self._end("truncated", f"超过{budget}个token的回复预算", f"over the reply budget of {budget} tokens")

    def out_of_tool_turns(self, limit: int) -> None:
        """The caller's own limit on tool turns was reached."""
        self._end("truncated", f"超过{limit}轮工具调用仍未停止", f"tool-turn limit of {limit} reached without a stop")

    def _end(self, status: Status, zh: str, en: str) -> None:
        """Close the day with its reason in the episode's language (records and reports show it)."""
        with speaking(self.episode.language):
            self.episode.end(status, say(zh, en))

    # -- the record ----------------------------------------------------------------------------

    def to_trajectory(self, source: str, **fields: Any) -> Trajectory:
        """The finished day as a Trajectory record; ``fields`` are its other fields (model, reward, ...)."""
        return Trajectory(
            task_id=self.episode.task.task_id, source=source, episode=self.episode, messages=self.messages, **fields
        )
