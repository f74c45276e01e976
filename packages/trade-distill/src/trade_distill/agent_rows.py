"""A trajectory as one row of ms-swift's agent SFT format: ``{"tools": "...", "messages": [...]}``.

The row holds the conversation only, not its rendering: ms-swift's agent template (``hermes`` for Qwen3,
``qwen3_5`` for Qwen3.5) renders the calls and results when it encodes the row, so one file serves either
target. The roles are ms-swift's own: an assistant turn is its text, then one ``tool_call`` message per call
(``{"name", "arguments"}``), then one ``tool_response`` per call in the same order. Reasoning goes inline as a
``<think>`` block (ms-swift drops a separate ``reasoning_content``). The tool results after the day's last call
end the row: the model never writes them, so they teach nothing.
"""

from __future__ import annotations

import json
from typing import Any

from trade_core.errors import TradeError
from trade_tools.day import split_reasoning
from trade_tools.trajectory import Message, Trajectory


def assistant_text(message: Message, *, strip_thinking: bool) -> str:
    """The reply as the model wrote it: ``<think>`` reasoning, then the answer; or the answer alone."""
    inline, answer = split_reasoning(message.content)
    reasoning = message.reasoning_content or inline
    if strip_thinking or not reasoning:
        return answer
    return f"<think>\n{reasoning.strip()}\n</think>\n\n{answer}"


def call_message(trajectory: Trajectory, name: str, arguments: str) -> dict[str, str]:
    """A ``tool_call`` message; the arguments must be the JSON object the Episode ran."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise TradeError(
            f"trajectory {trajectory.id} ({trajectory.task_id}): {name} was called with arguments that are not a "
            "JSON object",
            hint="filter first: `trade distill filter` (its malformed-calls rule removes such days)",
        )
    return {"role": "tool_call", "content": json.dumps({"name": name, "arguments": parsed}, ensure_ascii=False)}


def tool_result(trajectory: Trajectory, results: dict[str | None, str], call_id: str) -> str:
    if call_id not in results:
        raise TradeError(f"trajectory {trajectory.id} ({trajectory.task_id}): call {call_id} has no tool result")
    return results[call_id]


def agent_row(trajectory: Trajectory, *, strip_thinking: bool = False) -> dict[str, Any]:
    """The ms-swift agent row of ``trajectory``: its tools, prompt and every assistant turn with its results."""
    roles = [message.role for message in trajectory.messages[:2]]
    if roles != ["system", "user"]:
        raise TradeError(
            f"trajectory {trajectory.id} ({trajectory.task_id}) has no system and user prompt",
            hint="a baseline policy plays without a prompt: distil a model's days (`--policy llm` or `local`)",
        )
    results = {m.tool_call_id: m.content for m in trajectory.messages if m.role == "tool"}
    messages: list[dict[str, str]] = [{"role": m.role, "content": m.content} for m in trajectory.messages[:2]]
    for message in trajectory.messages[2:]:
        if message.role != "assistant":
            continue
        messages.append({"role": "assistant", "content": assistant_text(message, strip_thinking=strip_thinking)})
        calls = message.tool_calls or []
        messages += [call_message(trajectory, c.function.name, c.function.arguments) for c in calls]
        messages += [{"role": "tool_response", "content": tool_result(trajectory, results, c.id)} for c in calls]
    while messages[-1]["role"] == "tool_response":
        messages.pop()
    if len(messages) == 2:
        raise TradeError(f"trajectory {trajectory.id} ({trajectory.task_id}) has no assistant turn to train on")
    tools = trajectory.episode.tool_schemas()
    return {"tools": json.dumps(tools, ensure_ascii=False), "messages": messages}
