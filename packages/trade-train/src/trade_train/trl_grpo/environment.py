"""The trading day as a TRL environment: one instance per rollout, one Episode per day, the tools as methods.

TRL 1.16 (``GRPOTrainer(environment_factory=...)``) calls ``reset(**row)`` before each rollout and exposes
every public method of the environment's class as a tool, calling ``method(**arguments)`` with the arguments
it parsed from the reply. The methods are generated from the tool registry (:func:`environment_class`): a real
function per tool with a typed signature and a Google docstring built from the tool's schema, as TRL and
transformers' ``get_json_schema`` require; each accepts any keyword and hands it to ``episode.call``, so a wrong
argument gets the Episode's own error text, never a Python exception.

TRL shows the environment only the tool calls, not where one reply ends and the next begins. So the live
Episode only answers the model; when the rollout is scored, :meth:`TradingEnvironment.finish` plays the
finished conversation again through a :class:`~trade_tools.day.TradingDay` on a fresh Episode, exactly as
verl's agent loop and evaluation play a day (a reply is a turn, ``TakeAction(stop)`` ends the day, a reply
without a call fails it, the turn and token budgets truncate it). The tools are deterministic on the
point-in-time view, so the replay reads the texts the model read; the replayed day is the one scored and
recorded.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from trade_reward.scoring import score_day
from trade_tools.day import TradingDay
from trade_tools.episode import Episode, EpisodeSettings, Task
from trade_tools.grading import GroundTruth
from trade_tools.records import parse
from trade_train.rollouts import Rollout
from trade_train.store import market_store

JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}


class TradingEnvironment:
    """One rollout's trading day; subclasses made by :func:`environment_class` add the tools and the settings."""

    data: ClassVar[Path]
    settings: ClassVar[EpisodeSettings]

    def __init__(self) -> None:
        self.episode: Episode | None = None
        self.task: Task | None = None
        self.ground_truth = ""
        self.prompt: list[dict[str, str]] = []
        self.group = ""

    def reset(self, *, prompt: list[dict[str, str]], task: str, ground_truth: str, index: int, **_: Any) -> None:
        """Open the row's day (TRL reuses instances, so everything is set again); nothing is added to the prompt."""
        self.task = Task.model_validate_json(task)
        self.ground_truth, self.prompt, self.group = ground_truth, list(prompt), str(index)
        self.episode = Episode.start(self.task, market_store(self.data), settings=self.settings)

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        assert self.episode is not None, "TRL calls reset() before any tool"
        return self.episode.call(name, dict(arguments))

    def finish(self, completion: Sequence[Mapping[str, Any]], *, out_of_tokens: bool, budget: int) -> TradingDay:
        """The day replayed from the rollout's messages (TRL's parsed replies and tool messages), ended as verl
        ends it: stopped, a reply without a call (failed), the turn budget, or ``budget`` tokens when the
        completion reached it (``out_of_tokens``) or TRL dropped a reply's tool texts for lack of room."""
        assert self.task is not None, "TRL calls reset() before scoring"
        episode = Episode.start(self.task, market_store(self.data), settings=self.settings)
        day = TradingDay(episode, prompt=self.prompt)
        for position, message in enumerate(completion):
            if message.get("role") != "assistant" or not day.is_open:
                continue
            content, calls = _reply(message)
            answered = position + 1 < len(completion) and completion[position + 1].get("role") == "tool"
            if calls and answered:
                day.turn(content, calls)
                continue
            day.reply(content, calls)
            if calls or out_of_tokens:
                day.out_of_tokens(budget)
            else:
                day.no_call()
        if day.is_open:  # the completion ends with tool texts: TRL had no room left for another reply
            day.out_of_tokens(budget)
        return day

    def rollout(self, day: TradingDay, scheme: str) -> Rollout:
        """The replayed day scored by ``scheme`` as verl scores it (:func:`~trade_reward.scoring.score_day`), as a
        Rollout of its group."""
        assert self.task is not None, "TRL calls reset() before scoring"
        episode = day.episode.model_dump_json()
        reward = score_day(episode, self.ground_truth, scheme=scheme, source=f"trade-agent/{self.task.universe}")
        return Rollout(
            group=self.group,
            episode=day.episode,
            reward=reward,
            conversation=day.messages,
            ground_truth=parse(GroundTruth, self.ground_truth),
        )


def _reply(message: Mapping[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """A parsed reply as TradingDay takes it: the text with its think block, and ``(name, arguments JSON)``."""
    content = message.get("content") or ""
    if isinstance(content, list):  # content blocks
        content = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    if reasoning := message.get("reasoning_content"):
        content = f"<think>\n{reasoning}\n</think>\n\n{content}"
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        calls.append((str(function.get("name")), text))
    return content, calls


def environment_class(data: Path, settings: EpisodeSettings, schemas: Sequence[Mapping[str, Any]]) -> type:
    """A :class:`TradingEnvironment` subclass reading ``data`` with one method per tool schema."""
    methods = {schema["function"]["name"]: tool_method(schema) for schema in schemas}
    namespace = {"data": Path(data).resolve(), "settings": settings, **methods}
    return type("TradingEnvironment", (TradingEnvironment,), namespace)


def tool_method(schema: Mapping[str, Any]) -> Any:
    """A method named after the tool, with the typed signature and Google docstring of its schema, that runs
    the call on the rollout's Episode (with whatever keywords the model sent)."""
    function = schema["function"]
    name = function["name"]

    def method(self: TradingEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    required = set(function["parameters"].get("required", []))
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    lines = [function["description"], "", "Args:"]
    for key, spec in function["parameters"].get("properties", {}).items():
        hint = _hint(spec) if key in required else _hint(spec) | None
        default = inspect.Parameter.empty if key in required else None
        parameters.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        choices = f" (choices: {json.dumps(spec['enum'], ensure_ascii=False)})" if "enum" in spec else ""
        lines.append(f"    {key}: {' '.join(spec.get('description', key).split())}{choices}")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    method.__annotations__ = {p.name: p.annotation for p in parameters[1:]}
    return method


def _hint(spec: Mapping[str, Any]) -> Any:
    """The Python type of a schema property (enum values as a Literal, arrays as lists of their item type)."""
    if "enum" in spec:
        return Literal[tuple(spec["enum"])]
    if spec.get("type") == "array":
        return list[JSON_TYPES.get(spec.get("items", {}).get("type", "string"), str)]  # type: ignore[misc]
    return JSON_TYPES.get(spec.get("type", "string"), str)
