"""The two files verl reads to find our code in every Ray worker, written without importing verl.

The trainer plans a run (and ``trade train --dry-run`` prints it) on machines without verl, so the
class paths are strings here; ``tests/test_agent_loop.py`` checks they import where verl is installed.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from trade_core.errors import TradeError
from trade_tools.anonymize import hide_schemas
from trade_tools.episode import EpisodeSettings
from trade_tools.tool import TOOLS
from trade_train.verl_grpo.schema import AGENT_NAME

TOOL_CLASS = "trade_train.verl_grpo.tool.TradeTool"
LOOP_CLASS = "trade_train.verl_grpo.agent_loop.TradingAgentLoop"


def tools_yaml(data: Path, tools: list[str] | None = None, *, anonymized: bool = False) -> str:
    """verl's tool config (``multi_turn.tool_config_path``): a TradeTool entry per tool, all reading ``data``.

    ``tools`` defaults to the Episode's default tool set, the one the task prompts and evaluation use.
    ``anonymized`` (the tasks are): the schemas every anonymized Episode shows (no real code in an example),
    since verl renders this one file's schemas into every row's prompt.
    """
    registered = TOOLS.all()
    names = list(EpisodeSettings().tools if tools is None else tools)
    unknown = [name for name in names if name not in registered]
    if unknown:
        raise TradeError(f"unknown tool(s): {', '.join(unknown)}", hint=f"registered: {', '.join(sorted(registered))}")
    schemas = [registered[name].schema() for name in names]
    entries = [
        {
            "class_name": TOOL_CLASS,
            "config": {"type": "native", "data": str(Path(data).resolve())},
            "tool_schema": schema,
        }
        for schema in (hide_schemas(schemas) if anonymized else schemas)
    ]
    return yaml.safe_dump({"tools": entries}, allow_unicode=True, sort_keys=False)


def agent_loops_yaml() -> str:
    """verl's ``rollout.agent.agent_loop_config_path`` file: registers the loop in every Ray worker by import path."""
    return yaml.safe_dump([{"name": AGENT_NAME, "_target_": LOOP_CLASS}], sort_keys=False)
