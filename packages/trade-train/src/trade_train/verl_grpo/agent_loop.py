"""``trading_agent``: verl 0.9.1's ToolAgentLoop trading one day through one Episode per trajectory.

The loop opens the row's task (``extra_info.task``) as an Episode after the model's first reply, counts
every reply as a turn of it, ends the trajectory once ``TakeAction(stop)`` has run, and marks the
Episode ``truncated`` when the turn budget (``multi_turn.max_assistant_turns``) or the token budget
(``response_length``) cuts the day short; a reply without a tool call ends the day unstopped. The final
Episode goes into the output's ``extra_fields["episode"]`` as JSON, which verl's reward managers merge
into ``extra_info`` for ``trade_reward.verl.compute_score``; the conversation (the prompt, the replies with
their raw tool-call arguments, the tool texts) goes into ``extra_fields["conversation"]`` for the
Trajectory records the trainer writes each step.

Private API of verl 0.9.1 this relies on (pin ``verl==0.9.1``; re-check when moving): the state
handlers ``ToolAgentLoop._handle_generating_state`` and ``_handle_processing_tools_state``, the
dispatcher ``ToolAgentLoop._call_tool``, the attribute ``max_assistant_turns`` (only read by
``_handle_generating_state``), ``AgentData.extra_fields`` being filled from the server's output while it
is empty, ``AgentData.messages`` growing by the parsed reply and then its tool messages, and
``AgentLoopWorker._run_agent_loop`` building one agent loop per trajectory.
"""

from __future__ import annotations

import json
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall
from verl.tools.schemas import ToolResponse

from trade_core.errors import TradeError
from trade_reward.tasks import AGENT_NAME
from trade_tools.episode import Episode, EpisodeSettings, Task
from trade_tools.tool import available_tools
from trade_tools.trajectory import Message
from trade_train.verl_grpo.rollouts import CONVERSATION, EPISODE, reply_message
from trade_train.verl_grpo.store import market_store
from trade_train.verl_grpo.tool import TradeTool, episode_in


@register(AGENT_NAME)
class TradingAgentLoop(ToolAgentLoop):
    """ToolAgentLoop with the trading day's rules: stop ends it, budgets truncate it, the Episode is the result."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tools = [tool for tool in self.tools.values() if isinstance(tool, TradeTool)]
        if not tools:
            raise TradeError(
                "the trading agent loop has no trade tool",
                hint="set actor_rollout_ref.rollout.multi_turn.tool_config_path to a file written by tools_yaml()",
            )
        registered = available_tools()
        unknown = [tool.name for tool in tools if tool.name not in registered]
        if unknown:
            raise TradeError(f"tools.yaml names unregistered tool(s): {', '.join(unknown)}")
        longest = max(registered[tool.name].budget for tool in tools)
        if self.max_tool_response_length < longest:
            raise TradeError(
                f"multi_turn.max_tool_response_length={self.max_tool_response_length} would cut tool texts "
                f"of up to {longest} characters",
                hint=f"set actor_rollout_ref.rollout.multi_turn.max_tool_response_length={max(4096, longest)}",
            )
        self.data = tools[0].data
        # Every one of max_assistant_turns replies may act, as every one of the Episode's max_turns does in
        # evaluation. verl's own check would end the loop at the last reply before running its tool calls,
        # so the Episode keeps the budget and verl's check is switched off.
        self.settings = EpisodeSettings(
            tools=tuple(tool.name for tool in tools),
            max_turns=self.max_assistant_turns or EpisodeSettings().max_turns,
        )
        self.max_assistant_turns = None
        self.task: Task | None = None

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        # The row's extra_info reaches only run(), not AgentData; verl builds one loop per trajectory, so the
        # task can wait here for the Episode opened after the first reply.
        task = (kwargs.get("extra_info") or {}).get("task")
        if task is None:
            raise TradeError("the row has no extra_info.task", hint="build tasks with `trade data tasks`")
        self.task = Task.model_validate_json(task)
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields[EPISODE] = episode_in(output.extra_fields).model_dump_json()
        output.extra_fields[CONVERSATION] = json.dumps(output.extra_fields.get(CONVERSATION, []), ensure_ascii=False)
        return output

    def _episode(self, agent_data: AgentData) -> Episode:
        """The trajectory's Episode, opened on first use.

        First use is after the first reply: verl 0.9.1 copies the LLM server's extra_fields into
        ``agent_data.extra_fields`` only while that dict is empty.
        """
        if EPISODE not in agent_data.extra_fields:
            assert self.task is not None, "run() sets the task before any state handler"
            episode = Episode.start(self.task, market_store(self.data), settings=self.settings)
            agent_data.extra_fields[EPISODE] = episode
        return episode_in(agent_data.extra_fields)

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        seen = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        episode = self._episode(agent_data)
        episode.begin_turn()
        self._record_reply(agent_data, seen, episode.turns)
        if state is AgentState.TERMINATED:
            # verl 0.9.1 ends here for the token budget, max_user_turns, or a reply with no tool call.
            if len(agent_data.response_mask) >= self.response_length:
                episode.end("truncated", f"超过{self.response_length}个token的回复预算")
            elif self.max_user_turns and agent_data.user_turns >= self.max_user_turns:
                episode.end("truncated", f"超过{self.max_user_turns}轮工具调用仍未停止")
            else:
                episode.end("failed", "回复中没有工具调用")
        return state

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        seen = len(agent_data.messages)
        state = await super()._handle_processing_tools_state(agent_data)
        episode = episode_in(agent_data.extra_fields)
        self._record_tool_texts(agent_data, seen, episode.turns)
        if episode.status != "open":  # TakeAction(stop) ran
            return AgentState.TERMINATED
        if state is AgentState.TERMINATED:  # verl 0.9.1: the tool texts did not fit in response_length
            episode.end("truncated", f"超过{self.response_length}个token的回复预算")
        elif episode.turns >= episode.settings.max_turns:
            episode.end("truncated", f"超过{episode.settings.max_turns}轮仍未停止")
            return AgentState.TERMINATED
        return state

    def _record_reply(self, agent_data: AgentData, seen: int, turn: int) -> None:
        """The reply as a Message. One without a parsed tool call (cut by a budget, or its call was not valid
        JSON, which verl's parser drops) keeps the text exactly as the model wrote it."""
        parsed = len(agent_data.messages) > seen and agent_data.tool_calls
        if parsed:
            content = agent_data.messages[seen].get("content") or ""
            calls = [(call.name, call.arguments) for call in agent_data.tool_calls[: self.max_parallel_calls]]
        else:
            content, calls = self.tokenizer.decode(agent_data.response_ids), []
        for token in self.tokenizer.all_special_tokens:
            content = content.replace(token, "")
        conversation = agent_data.extra_fields.setdefault(CONVERSATION, [])
        if not conversation:  # what the model saw first: the row's prompt
            prompt = agent_data.messages[:seen]
            conversation += [Message.model_validate(m).model_dump(exclude_none=True) for m in prompt]
        conversation.append(reply_message(content, calls, turn).model_dump(exclude_none=True))

    def _record_tool_texts(self, agent_data: AgentData, seen: int, turn: int) -> None:
        calls = agent_data.tool_calls[: self.max_parallel_calls]
        for i, (message, call) in enumerate(zip(agent_data.messages[seen:], calls, strict=False)):
            text = message.get("content")
            agent_data.extra_fields[CONVERSATION].append(
                {"role": "tool", "content": text if isinstance(text, str) else "", "tool_call_id": f"call_{turn}_{i}",
                 "name": call.name}
            )  # fmt: skip

    async def _call_tool(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Calls verl refuses before any tool runs (an unknown name, arguments that are not JSON) go to the
        Episode too, so the model reads the error text evaluation shows and the Episode counts the error."""
        if tool_call.name in self.tools and _is_json(tool_call.arguments):
            return await super()._call_tool(tool_call, tools_kwargs, agent_data)
        text = episode_in(agent_data.extra_fields).call(tool_call.name, tool_call.arguments)
        return ToolResponse(text=text), 0.0, {"tool_error": 1}


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return False
    return True
