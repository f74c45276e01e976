"""verl's side of the trading tools: one ``BaseTool`` class serves every registered trade tool.

verl 0.9.1 shares each tool object between all trajectories of a worker and runs create -> execute ->
release around every single call, so nothing lives in the tool. The day being traded (portfolio,
actions, counters) is the trajectory's :class:`~trade_tools.episode.Episode`, kept in
``agent_data.extra_fields["episode"]`` by :class:`~trade_train.verl_grpo.agent_loop.TradingAgentLoop`;
a call is ``episode.call(name, arguments)``, the same call evaluation makes, so the texts the model
reads and the state they change cannot differ between training and evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from trade_core.errors import TradeError
from trade_tools.episode import Episode
from trade_train.store import market_store
from trade_train.verl_grpo.schema import EPISODE


def episode_in(fields: Mapping[str, Any]) -> Episode:
    """The trajectory's Episode from ``agent_data.extra_fields``; a clear error outside the trading loop."""
    episode = fields.get(EPISODE)
    if not isinstance(episode, Episode):
        raise TradeError("this trajectory has no Episode", hint="run trade tools under the agent loop 'trading_agent'")
    return episode


class TradeTool(BaseTool):
    """Any registered trade tool (its name comes from ``tool_schema``) answered by the trajectory's Episode.

    Config (``tools.yaml``): ``{type: native, data: DATASET}``; the dataset is loaded when verl builds the
    tool, so a worker that cannot read it fails at start-up instead of in the middle of a rollout.
    """

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None) -> None:
        super().__init__(config, tool_schema)
        if not config.get("data"):
            raise TradeError(f"tool {self.name}: its config has no 'data'", hint="write tools.yaml with tools_yaml()")
        self.data = Path(config["data"])
        market_store(self.data)

    async def execute(
        self, instance_id: str, parameters: Any, **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Run the call on the Episode; step reward 0 (the day is scored once, at the end)."""
        episode = episode_in(kwargs["agent_data"].extra_fields)
        errors = episode.tool_errors
        # verl decoded the arguments' JSON; anything but an object goes back as JSON text, which the Episode
        # refuses with the same message evaluation shows for it.
        arguments = parameters if isinstance(parameters, dict) else json.dumps(parameters, ensure_ascii=False)
        text = episode.call(self.name, arguments)
        return ToolResponse(text=text), 0.0, {"tool_error": episode.tool_errors - errors}
