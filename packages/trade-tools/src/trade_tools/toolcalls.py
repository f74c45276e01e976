"""Tool calls in a model's generated text, read as the serving parsers read them.

A model served by vLLM has its reply parsed by the server (``--reasoning-parser qwen3`` and a tool-call parser
per family); a model run in-process (``trade eval --policy local``, the tiny model's tests) has only its text.
This module reads that text the same way. The reasoning is split off as vLLM 0.32's qwen3 reasoning parser does
with thinking on (the chat template's default, and what our requests get): a reply is reasoning from its start
until ``</think>`` or its first ``<tool_call>``, whichever comes first (a call written while thinking is a call,
as in vLLM and in verl's parsers, which read every block), or to its end when it has neither; the template may
open the block in the prompt, so an opening ``<think>`` is not needed. Then every ``<tool_call>`` block of the
answer is read, in the family's format:

- ``hermes`` (Qwen3, and the ChatML bases ``trade model`` builds):
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``;
- ``qwen3_coder`` (Qwen3.5): ``<tool_call><function=NAME><parameter=K>V</parameter>...</function></tool_call>``,
  each value converted by the tool schema's type of its parameter; a block cut off at the end still counts, as
  in the vLLM and verl parsers.

A block that is not a call (JSON that does not parse, no name, no ``<function=...>``) stays in the answer's text,
as a server's parser leaves it: with no call at all the Episode ends the day "no tool call". Arguments go on as
JSON text, so arguments of the wrong shape get the Episode's own error text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from trade_core.errors import TradeError

HERMES, QWEN3_CODER = "hermes", "qwen3_coder"
FORMATS = {
    "qwen3": HERMES,
    "qwen3_moe": HERMES,
    "qwen3_next": HERMES,
    "qwen3_5": QWEN3_CODER,
    "qwen3_5_text": QWEN3_CODER,
    "qwen3_5_moe": QWEN3_CODER,
    "qwen3_5_moe_text": QWEN3_CODER,
}
"""The tool-call format of each ``model_type`` (vLLM's ``--tool-call-parser`` names, verl's ``multi_turn.format``).
Every family here thinks in ``<think>`` blocks before it answers."""
STATED_FORMAT = "tool_call_format"
"""A ``config.json`` key by which a model folder states its format, above its family's: ``trade model`` writes it
into the bases it builds (SmolLM2 is a ``llama``, whose other models do not write hermes calls); such a base
does not think."""
MARKUP = ("<tool_call>", "</tool_call>", "<function=")
"""Tool-call markup of both formats: left in a reply's text, a parser did not read it as a call."""
CALL_BLOCK = re.compile(r"\s*<tool_call>(.*?)</tool_call>", re.DOTALL)
_OPEN_BLOCK = re.compile(r"\s*<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)


class ParsedReply(NamedTuple):
    """A generated reply as a server returns it: reasoning, the answer's text without its calls, the calls."""

    reasoning: str | None
    content: str
    calls: list[tuple[str, str]]
    """``(name, arguments as JSON text)`` in the order written."""


class ModelFormat(NamedTuple):
    """How a model folder's model writes tool calls, and whether it thinks first (vLLM's qwen3 reasoning parser)."""

    tool_calls: str
    thinks: bool


def model_family(model_dir: Path) -> str:
    """The ``model_type`` of ``model_dir/config.json``, or the snake-cased name of its first architecture."""
    return _family(_config(model_dir))


def model_format(model_dir: Path, *, hint: str = "") -> ModelFormat:
    """The format the folder states (:data:`STATED_FORMAT`), else its family's; neither is an error (with
    ``hint``, the caller's way around it, after the known families)."""
    config = _config(model_dir)
    stated = config.get(STATED_FORMAT)
    if stated in (HERMES, QWEN3_CODER):
        return ModelFormat(stated, thinks=False)
    family = _family(config)
    if family not in FORMATS:
        known = f"known families: {', '.join(FORMATS)}, or a base built by `trade model`"
        raise TradeError(
            f"{model_dir}: no known tool-call format for model family {family or '(none in config.json)'!r}",
            hint=f"{known}; {hint}" if hint else known,
        )
    return ModelFormat(FORMATS[family], thinks=True)


def _config(model_dir: Path) -> dict[str, Any]:
    config_file = Path(model_dir) / "config.json"
    if not config_file.is_file():
        raise TradeError(f"{model_dir} has no config.json", hint="pass a Hugging Face model folder (merged checkpoint)")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TradeError(f"{config_file} is not readable JSON: {error}") from None
    return config if isinstance(config, dict) else {}


def _family(config: Mapping[str, Any]) -> str:
    family = config.get("model_type")
    architectures = config.get("architectures")
    if not family and isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        family = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", architectures[0].split("For")[0]).lower()
    return family if isinstance(family, str) else ""


def parse_reply(text: str, fmt: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedReply:
    """Split ``text`` (the decoded completion, special tokens dropped) into reasoning, answer and calls.

    ``tools``: the OpenAI tool schemas the model was shown, whose parameter types convert ``qwen3_coder``
    values (hermes arguments are JSON already).
    """
    if fmt not in (HERMES, QWEN3_CODER):
        raise TradeError(f"unknown tool-call format {fmt!r}", hint=f"choose {HERMES} or {QWEN3_CODER}")
    reasoning, answer = _split_reasoning(text)
    calls: list[tuple[str, str]] = []
    kept: list[str] = []
    position = 0
    blocks = CALL_BLOCK if fmt == HERMES else _OPEN_BLOCK
    for block in blocks.finditer(answer):
        parsed = _hermes(block.group(1)) if fmt == HERMES else _xml(block.group(1), _types(tools))
        if parsed:
            calls.extend(parsed)
            kept.append(answer[position : block.start()])
            position = block.end()
    kept.append(answer[position:])
    return ParsedReply(reasoning, "".join(kept).strip(), calls)


def _split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` as vLLM splits them (see the module's docstring): the reasoning ends at the first
    ``</think>`` or ``<tool_call>``, whichever comes first; ``<think>`` and a ``</think>`` after the reasoning are
    markers vLLM drops."""
    ends = [(at, marker) for marker in ("</think>", "<tool_call>") if (at := text.find(marker)) >= 0]
    at, marker = min(ends, default=(len(text), ""))
    answer = text[at + len(marker) :] if marker == "</think>" else text[at:]
    thought = text[:at].replace("<think>", "").strip()
    return thought or None, answer.replace("</think>", "")


def _hermes(body: str) -> list[tuple[str, str]]:
    try:
        call = json.loads(body)
    except ValueError:  # not JSON, or a number past Python's digit limit
        return []
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or "arguments" not in call:
        return []
    return [(call["name"], json.dumps(call["arguments"], ensure_ascii=False))]


def _xml(body: str, types: Mapping[str, Mapping[str, str]]) -> list[tuple[str, str]]:
    calls = []
    for name, inner in _FUNCTION.findall(body):
        declared = types.get(name, {})
        arguments = {key: _value(_trim(raw), declared.get(key)) for key, raw in _PARAMETER.findall(inner)}
        calls.append((name, json.dumps(arguments, ensure_ascii=False)))
    return calls


def _trim(raw: str) -> str:
    """A value without the one newline the format puts on each side."""
    return raw.removeprefix("\n").removesuffix("\n")


def _types(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each tool's parameter types by name ("string" where a parameter declares none)."""
    types: dict[str, dict[str, str]] = {}
    for tool in tools:
        function = tool.get("function") or {}
        properties = (function.get("parameters") or {}).get("properties") or {}
        types[function.get("name", "")] = {key: str(spec.get("type", "string")) for key, spec in properties.items()}
    return types


def _value(raw: str, kind: str | None) -> Any:
    """A ``qwen3_coder`` parameter value as its declared type; text where it is not one (the Episode says why)."""
    if raw.lower() == "null":
        return None
    if kind is None or kind == "string":
        return raw
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw.strip().lower(), raw)
    try:
        value = json.loads(raw)
    except ValueError:
        try:
            value = ast.literal_eval(raw)  # Python literals (single quotes), never code
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return raw
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value
