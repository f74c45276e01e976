"""Which ms-swift model type, chat template and agent template a model folder trains with.

ms-swift 4.6 needs ``--model_type`` for a local folder (it cannot match the path to a hub name), and the agent
template decides how tool calls are rendered: Qwen3 writes hermes JSON in ``<tool_call>``, Qwen3.5 XML
``<function=...>`` (its own ``qwen3_5`` agent template). The family is the folder's ``config.json`` ``model_type``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from trade_core.errors import TradeError


class SwiftModel(NamedTuple):
    model_type: str
    template: str
    agent_template: str


FAMILIES = {
    "qwen3": SwiftModel("qwen3", "qwen3", "hermes"),
    "qwen3_moe": SwiftModel("qwen3_moe", "qwen3", "hermes"),
    "qwen3_5": SwiftModel("qwen3_5", "qwen3_5", "qwen3_5"),
    "qwen3_5_moe": SwiftModel("qwen3_5_moe", "qwen3_5", "qwen3_5"),
}
"""``config.json`` ``model_type`` -> ms-swift 4.6's model type, template and agent template."""
AGENT_TEMPLATES = ("hermes", "qwen3_5")


def model_family(model_dir: Path) -> str:
    """``config.json``'s ``model_type`` (a clear error where there is none)."""
    config = Path(model_dir) / "config.json"
    try:
        family = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        family = None
    if not isinstance(family, str) or not family:
        raise TradeError(f"{config} names no model_type", hint="pass a Hugging Face model folder")
    return family


def swift_model(model_dir: Path) -> SwiftModel:
    """ms-swift's names for the model in ``model_dir``; a family it is not set up for is an error."""
    family = model_family(model_dir)
    if family not in FAMILIES:
        raise TradeError(
            f"{model_dir}: no ms-swift settings for model family {family!r}",
            hint=f"known: {', '.join(FAMILIES)}; or pass -- --model_type ... --template ... --agent_template ...",
        )
    return FAMILIES[family]
