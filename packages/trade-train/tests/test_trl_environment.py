"""trl-grpo's environment: a day played through it trades, ends and scores as the Episode and the scheme do
directly, with the Episode's own tool schemas (no TRL needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trade_reward.outcome import outcome
from trade_reward.schemes import get_scheme
from trade_reward.taskfolder import TaskRecord, read_records
from trade_tools.day import TradingDay
from trade_tools.episode import Episode, EpisodeSettings
from trade_train.store import market_store
from trade_train.trl_grpo.environment import TradingEnvironment, environment_class
from trade_train.trl_grpo.run import AnyTool


def opened(tasks: Path, data: Path, settings: EpisodeSettings | None = None) -> tuple[TaskRecord, TradingEnvironment]:
    """The first train task and an environment reset on its row, as TRL resets one."""
    record = read_records(tasks, "train")[0]
    settings = settings or EpisodeSettings()
    schemas = Episode.start(record.task, market_store(data), settings=settings).tool_schemas()
    env = environment_class(data, settings, schemas)()
    row = {"prompt": record.prompt, "task": record.task.model_dump_json(), "index": record.index}
    assert env.reset(**row, ground_truth=record.ground_truth.model_dump_json()) is None  # nothing added to the prompt
    return record, env


def played(env: TradingEnvironment, replies: list[list[tuple[str, dict[str, Any]]]]) -> list[dict[str, Any]]:
    """A completion as TRL builds it: each reply's calls run live through the environment's methods, then its
    tool messages; replies without calls end it."""
    completion: list[dict[str, Any]] = []
    for number, calls in enumerate(replies):
        message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": f"第{number}步"}
        if calls:
            message["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
        completion.append(message)
        for name, arguments in calls:
            completion.append({"role": "tool", "name": name, "content": getattr(env, name)(**arguments)})
    return completion


def direct(record: TaskRecord, data: Path, replies: list[list[tuple[str, dict[str, Any]]]], settings: EpisodeSettings):
    """The same replies played on the Episode directly, as evaluation plays them."""
    day = TradingDay(Episode.start(record.task, market_store(data), settings=settings), prompt=record.prompt)
    for number, calls in enumerate(replies):
        if day.is_open:
            day.turn(f"<think>\n第{number}步\n</think>\n\n", [(n, json.dumps(a, ensure_ascii=False)) for n, a in calls])
    return day


SYMBOL_OF = "symbol"
TRADING = [
    [("get_macro_indicators", {"index": "SH000300"})],
    [("get_price_data", {SYMBOL_OF: "POOL0"}), ("compute_alpha_factor", {"expression": "ROC20", "symbols": ["POOL0"]})],
    [("TakeAction", {"type": "buy", SYMBOL_OF: "POOL0", "amount": 100, "reasoning": "走势偏强"})],
    [("get_price_data", {"symbol": "NOT_A_STOCK"}), ("TakeAction", {"type": "stop", "reasoning": "结束"})],
    [("get_price_data", {"symbol": "POOL0"})],  # after the stop: not part of the day
]


def scripted(record: TaskRecord, replies: list) -> list:
    pool = record.task.pool[0]
    return [
        [(n, {k: (pool if v == "POOL0" else [pool] if v == ["POOL0"] else v) for k, v in a.items()}) for n, a in r]
        for r in replies
    ]


@pytest.mark.parametrize(
    ("replies", "ends"),
    [
        (TRADING, "stopped"),
        ([*TRADING[:2], []], "failed"),  # a reply without a tool call
    ],
)
def test_a_day_played_through_the_environment_is_the_episodes_day(
    tasks: Path, sample_dataset: Path, replies: list, ends: str
) -> None:
    record, env = opened(tasks, sample_dataset)
    replies = scripted(record, replies)
    completion = played(env, replies)
    day = env.finish(completion, out_of_tokens=False, budget=768)
    expected = direct(record, sample_dataset, replies, EpisodeSettings())
    assert day.episode.status == expected.episode.status == ends
    assert day.episode.model_dump() == expected.episode.model_dump()
    assert [m.model_dump() for m in day.messages] == [m.model_dump() for m in expected.messages]
    live = [m["content"] for m in completion if m["role"] == "tool"]
    replayed = [m.content for m in day.messages if m.role == "tool"]
    assert replayed == live[: len(replayed)]  # the model read what the scored day reads
    rollout = env.rollout(day, "bucketed")
    assert rollout.reward == get_scheme("bucketed").score(outcome(expected.episode, record.ground_truth))
    assert rollout.group == str(record.index) and rollout.ground_truth == record.ground_truth


def test_budgets_end_the_day_as_verl_ends_it(tasks: Path, sample_dataset: Path) -> None:
    settings = EpisodeSettings(max_turns=2)
    _, env = opened(tasks, sample_dataset, settings)
    macro = [("get_macro_indicators", {})]
    day = env.finish(played(env, [macro, macro, macro]), out_of_tokens=False, budget=768)
    assert (day.episode.status, day.episode.status_reason, day.episode.turns) == ("truncated", "超过2轮仍未停止", 2)
    cut = played(env, [macro, []])  # the last reply was cut by the token budget
    day = env.finish(cut, out_of_tokens=True, budget=768)
    assert (day.episode.status, day.episode.status_reason) == ("truncated", "超过768个token的回复预算")
    unanswered = played(env, [macro])[:1]  # TRL had no room for the reply's tool texts
    assert env.finish(unanswered, out_of_tokens=False, budget=768).episode.status == "truncated"


def test_the_tools_are_the_episodes_tools(tasks: Path, sample_dataset: Path) -> None:
    transformers = pytest.importorskip("transformers")
    _, env = opened(tasks, sample_dataset)
    schemas = env.episode.tool_schemas()  # type: ignore[union-attr]
    rendered = [transformers.utils.get_json_schema(getattr(env, s["function"]["name"])) for s in schemas]
    for schema in rendered:  # TRL's rendering differs only in marking optional arguments nullable, leaving out
        schema["function"]["parameters"].setdefault("required", [])  # an empty "required" and key order
        for spec in schema["function"]["parameters"]["properties"].values():
            spec.pop("nullable", None)
    assert rendered == schemas


def test_wrong_arguments_and_unknown_tools_get_the_episodes_error_texts(tasks: Path, sample_dataset: Path) -> None:
    _, env = opened(tasks, sample_dataset)
    assert env.TakeAction(type="stop", colour="红") == "错误：不支持的参数 'colour'"
    tools = AnyTool({}, env)
    assert "get_news" in tools
    assert tools["get_news"](symbol="SH600519").startswith("错误：未知工具 'get_news'")
    assert (env.episode.tool_calls, env.episode.tool_errors) == (2, 2)  # type: ignore[union-attr]
