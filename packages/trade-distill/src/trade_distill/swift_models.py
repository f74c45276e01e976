"""Which ms-swift model type, chat template and agent template a model folder trains with.

ms-swift 4.6 needs ``--model_type`` for a local folder (it cannot match the path to a hub name), and the agent
template decides how tool calls are rendered: Qwen3 writes hermes JSON in ``<tool_call>``, Qwen3.5 XML
``<function=...>`` (its own ``qwen3_5`` agent template). The family is the folder's ``config.json`` ``model_type``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from trade_core.errors import TradeError
from trade_tools.toolcalls import model_family


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


def swift_model(model_dir: Path) -> SwiftModel:
    """ms-swift's names for the model in ``model_dir``; a family it is not set up for is an error."""
    family = model_family(model_dir)
    if family not in FAMILIES:
        raise TradeError(
            f"{model_dir}: no ms-swift settings for model family {family or '(none in config.json)'!r}",
            hint=f"known: {', '.join(FAMILIES)}; or pass -- --model_type ... --template ... --agent_template ...",
        )
    return FAMILIES[family]
