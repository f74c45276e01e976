"""``trading_agent``: verl 0.9.1's ToolAgentLoop trading one day through one Episode per trajectory.

The loop opens the row's task (``extra_info.task``) as a :class:`~trade_tools.day.TradingDay` after the
model's first reply and plays the day through it, as evaluation does: every reply is a turn, the day ends
once ``TakeAction(stop)`` has run, the turn budget (``multi_turn.max_assistant_turns``) or the token budget
(``response_length``) truncates it, and a reply without a tool call ends it unstopped. verl runs the tool
calls (:class:`~trade_train.verl_grpo.tool.TradeTool`); the loop reports the replies, the texts and the
budgets to the day. The final Episode goes into the output's ``extra_fields["episode"]`` as JSON, which
verl's reward managers merge into ``extra_info`` for ``compute_score``; the day's conversation (the prompt,
the replies with their raw tool-call arguments, the tool texts) goes into ``extra_fields["conversation"]``
for the Trajectory records the trainer writes each step.

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
from trade_tools.day import TradingDay
from trade_tools.episode import MAX_TURNS, TOOL_TEXT_LIMIT, Episode, EpisodeSettings, Task
from trade_tools.tool import TOOLS
from trade_tools.trajectory import ToolCall
from trade_train.store import market_store
from trade_train.verl_grpo.schema import AGENT_NAME, CONVERSATION, EPISODE
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
        registered = TOOLS.all()
        unknown = [tool.name for tool in tools if tool.name not in registered]
        if unknown:
            raise TradeError(f"tools.yaml names unregistered tool(s): {', '.join(unknown)}")
        longest = max(registered[tool.name].budget for tool in tools)
        if self.max_tool_response_length < longest:
            raise TradeError(
                f"multi_turn.max_tool_response_length={self.max_tool_response_length} would cut tool texts "
                f"of up to {longest} characters",
                hint="set actor_rollout_ref.rollout.multi_turn.max_tool_response_length="
                f"{max(TOOL_TEXT_LIMIT, longest)}",
            )
        self.data = tools[0].data
        # Every one of max_assistant_turns replies may act, as every one of the Episode's max_turns does in
        # evaluation. verl's own check would end the loop at the last reply before running its tool calls,
        # so the TradingDay keeps the budget and verl's check is switched off.
        self.settings = EpisodeSettings(
            tools=tuple(tool.name for tool in tools), max_turns=self.max_assistant_turns or MAX_TURNS
        )
        self.max_assistant_turns = None
        self.task: Task | None = None
        self.day: TradingDay | None = None
        self.calls: list[ToolCall] = []
        """The last reply's calls, as the day recorded them."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        # The row's extra_info reaches only run(), not AgentData; verl builds one loop per trajectory, so the
        # task can wait here for the Episode opened after the first reply.
        task = (kwargs.get("extra_info") or {}).get("task")
        if task is None:
            raise TradeError("the row has no extra_info.task", hint="build tasks with `trade data tasks`")
        self.task = Task.model_validate_json(task)
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields[EPISODE] = episode_in(output.extra_fields).model_dump_json()
        assert self.day is not None, "the Episode is the day's"
        conversation = [message.model_dump(exclude_none=True) for message in self.day.messages]
        output.extra_fields[CONVERSATION] = json.dumps(conversation, ensure_ascii=False)
        return output

    def _day(self, agent_data: AgentData, seen: int) -> TradingDay:
        """The trajectory's day, opened on first use with the row's prompt (the first ``seen`` messages).

        First use is after the first reply: verl 0.9.1 copies the LLM server's extra_fields into
        ``agent_data.extra_fields`` only while that dict is empty. The Episode goes there for the TradeTools.
        """
        if self.day is None:
            assert self.task is not None, "run() sets the task before any state handler"
            episode = Episode.start(self.task, market_store(self.data), settings=self.settings)
            self.day = TradingDay(episode, prompt=agent_data.messages[:seen])
            agent_data.extra_fields[EPISODE] = episode
        return self.day

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        seen = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        day = self._day(agent_data, seen)
        self.calls = day.reply(*self._reply(agent_data, seen))
        if state is AgentState.TERMINATED:
            # verl 0.9.1 ends here for the token budget, max_user_turns, or a reply with no tool call.
            if len(agent_data.response_mask) >= self.response_length:
                day.out_of_tokens(self.response_length)
            elif self.max_user_turns and agent_data.user_turns >= self.max_user_turns:
                day.out_of_tool_turns(self.max_user_turns)
            else:
                day.no_call()
        return state

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        seen = len(agent_data.messages)
        state = await super()._handle_processing_tools_state(agent_data)
        assert self.day is not None, "a reply came first"
        for message, call in zip(agent_data.messages[seen:], self.calls, strict=False):
            text = message.get("content")
            self.day.answer(call, text if isinstance(text, str) else "")
        if not self.day.is_open:  # TakeAction(stop) ran
            return AgentState.TERMINATED
        if state is AgentState.TERMINATED:  # verl 0.9.1: the tool texts did not fit in response_length
            self.day.out_of_tokens(self.response_length)
        elif not self.day.end_turn():
            return AgentState.TERMINATED
        return state

    def _reply(self, agent_data: AgentData, seen: int) -> tuple[str, list[tuple[str, str]]]:
        """The reply's text and calls. One without a parsed tool call (cut by a budget, or its call was not
        valid JSON, which verl's parser drops) keeps the text exactly as the model wrote it."""
        parsed = len(agent_data.messages) > seen and agent_data.tool_calls
        if parsed:
            content = agent_data.messages[seen].get("content") or ""
            calls = [(call.name, call.arguments) for call in agent_data.tool_calls[: self.max_parallel_calls]]
        else:
            content, calls = self.tokenizer.decode(agent_data.response_ids), []
        for token in self.tokenizer.all_special_tokens:
            content = content.replace(token, "")
        return content, calls

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
