"""The Episode: one JSON-serialisable state, tool calls that answer errors as text, budgets, schemas."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import jsonschema
import pytest

from trade_core import hookimpl
from trade_core.errors import TradeError
from trade_core.plugins import get_manager
from trade_core.testing import inline_plugin
from trade_data.store import MarketStore
from trade_tools.day import TradingDay
from trade_tools.episode import DEFAULT_TOOLS, Episode, EpisodeSettings, Task
from trade_tools.sampler import day_task
from trade_tools.tool import Arguments, Tool
from trade_tools.trajectory import read_trajectories, write_trajectories

POOL = ["SH600519", "SZ000001", "SH600036", "SZ300750"]


def test_json_round_trip_keeps_state_and_answers_alike(open_day, sample_store: MarketStore) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL, holdings={"SZ000001": 1000})
    TradingDay(day).turn("", [("TakeAction", '{"type": "buy", "symbol": "SH600519", "amount": 100}')])
    assert day.turns == 1
    copy = Episode.model_validate_json(day.model_dump_json()).bind(sample_store)
    assert copy.model_dump() == day.model_dump()
    for name, args in [
        ("get_price_data", {"symbol": "SZ300750", "period": "30d"}),
        ("TakeAction", {"type": "sell", "symbol": "SZ000001", "amount": 300}),
        ("get_macro_indicators", {"index": "SH000905"}),
    ]:
        assert copy.call(name, json.dumps(args)) == day.call(name, json.dumps(args))
    assert copy.model_dump() == day.model_dump()
    with pytest.raises(TradeError, match="no market data bound"):
        Episode.model_validate_json(day.model_dump_json()).value()


MALFORMED = [
    ("nope", "{}", "未知工具 'nope'"),
    (["get_price_data"], "{}", "未知工具 \"['get_price_data']\""),  # a parser handing over a non-string name
    ("get_price_data", "{symbol: SH600519}", "参数不是合法的JSON"),
    ("get_price_data", "[1, 2]", "参数必须是JSON对象"),
    ("get_price_data", '{"symbol": 600519}', "参数 symbol 无效"),
    ("get_price_data", "{}", "缺少参数 symbol"),
    ("get_price_data", '{"symbol": "SH601398"}', "SH601398 不在股票池中"),
    ("get_price_data", '{"symbol": "XX"}', "XX 不在股票池中"),
    ("get_price_data", '{"symbol": "SH600519", "end_date": "2024-07-01"}', "不接受日期参数"),
    ("get_price_data", '{"symbol": "SH600519", "period": "0d"}', "period '0d' 无效"),
    ("get_price_data", '{"symbol": "SH600519", "indicators": ["MA7"]}', "未知指标 MA7；可用：MA5"),
    ("get_macro_indicators", '{"index": "SH000016"}', "未知指数 SH000016；"),
    ("get_macro_indicators", '{"period": "abc"}', "period 'abc' 无效"),
    ("TakeAction", '{"type": "hold"}', "参数 type 无效"),
    ("TakeAction", '{"type": "buy", "symbol": "SH600519"}', "订单被拒绝：buy 需要 symbol 和 amount"),
]


@pytest.mark.parametrize(("name", "arguments", "expected"), MALFORMED)
def test_malformed_calls_answer_an_error_and_change_nothing(open_day, name: str, arguments: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL, holdings={"SZ000001": 1000})
    before = day.model_dump(exclude={"tool_calls", "tool_errors", "actions"})
    text = day.call(name, arguments)
    assert expected in text, text
    assert day.model_dump(exclude={"tool_calls", "tool_errors", "actions"}) == before
    assert day.internal_errors == 0 and day.status == "open"


def test_character_budget_cuts_long_texts(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL, settings=EpisodeSettings(char_budgets={"get_price_data": 200}))
    text = day.call("get_price_data", '{"symbol": "SH600519", "indicators": ["MA5", "MA10", "MA20", "MA60"]}')
    assert len(text) == 200 and text.endswith("…（已截断）")


def test_schemas_are_valid_openai_functions(open_day) -> None:  # type: ignore[no-untyped-def]
    schemas = open_day("2024-06-14", POOL).tool_schemas()
    assert [s["function"]["name"] for s in schemas] == [
        "get_price_data",
        "get_macro_indicators",
        "compute_alpha_factor",
        "TakeAction",
    ]
    for schema in schemas:
        assert schema["type"] == "function" and schema["function"]["description"]
        parameters = schema["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert set(parameters["required"]) <= set(parameters["properties"])
        for spec in parameters["properties"].values():
            assert set(spec) <= {"type", "description", "enum", "items"} and spec["type"] and spec["description"]
    action = schemas[3]["function"]["parameters"]
    assert action["properties"]["type"]["enum"] == ["buy", "sell", "stop"] and action["required"] == ["type"]
    jsonschema.validate({"type": "buy", "symbol": "SH600519", "amount": 100}, action)
    action["properties"].clear()  # each episode's schemas are its own: a caller's edit reaches no other
    assert open_day("2024-06-14", POOL).tool_schemas()[3]["function"]["parameters"]["properties"]


@pytest.mark.real_data
def test_bad_tasks_are_refused_clearly(sample_store: MarketStore) -> None:
    for task, message in [
        (Task(task_id="a", date="2024-06-15", pool=["SH600519"], cash=1), "2024-06-15 is not a trading day"),
        (Task(task_id="b", date="2024-06-14", pool=["SH000300"], cash=1), "SH000300 is not a stock"),
        (Task(task_id="c", date="2018-06-14", pool=["SH688981"], cash=1), "SH688981 is not a stock listed by"),
        (Task(task_id="d", date="2024-06-14", pool=["SH600519"], holdings={"SH600519": 0}, cash=1), "0 shares"),
    ]:
        with pytest.raises(TradeError, match=message):
            Episode.start(task, sample_store)


def test_trajectory_jsonl_round_trip_and_bad_lines(open_day, tmp_path) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL)
    day.call("TakeAction", '{"type": "stop", "reasoning": "观望"}')
    trajectory = TradingDay(day).to_trajectory("test")
    path = write_trajectories(tmp_path / "t.jsonl", [trajectory, trajectory])
    assert [t.model_dump() for t in read_trajectories(path)] == [trajectory.model_dump()] * 2
    path.write_text(path.read_text() + '{"version": 1, "task_id": 3}\n')
    with pytest.raises(TradeError, match=r"t.jsonl:3: not a trajectory"):
        list(read_trajectories(path))


def _synth_task(store: MarketStore, **look: object) -> Task:
    return day_task(store, "2020-05-06", pool_size=5, seed=3).model_copy(update=look)


def test_a_task_that_names_tools_offers_only_those(synth_store: MarketStore) -> None:
    """In the task's order, over the settings' own: every trainer and evaluation then offers the same day; another
    tool answers the Episode's unknown-tool error, also after a JSON round trip."""
    tools = ["TakeAction", "compute_alpha_factor"]
    task = _synth_task(synth_store, tools=tools)
    day = Episode.start(task, synth_store, settings=EpisodeSettings(tools=DEFAULT_TOOLS, max_turns=5))
    assert day.settings.tools == tuple(tools) and day.settings.max_turns == 5
    assert [s["function"]["name"] for s in day.tool_schemas()] == tools
    system = day.messages()[0]["content"]
    listed = system[system.index("## 可用工具") :].splitlines()[1:]
    assert [line.split("(")[0] for line in listed] == ["- TakeAction", "- compute_alpha_factor"]
    refused = "错误：未知工具 'get_price_data'，可用工具：TakeAction, compute_alpha_factor"
    assert day.call("get_price_data", {"symbol": task.pool[0]}) == refused
    assert day.tool_errors == 1 and day.internal_errors == 0
    assert day.call("compute_alpha_factor", {"expression": "KMID"}).startswith("## Alpha158因子 KMID")
    copy = Episode.model_validate_json(day.model_dump_json()).bind(synth_store)
    assert copy.call("get_price_data", {"symbol": task.pool[0]}) == refused
    plain = Episode.start(_synth_task(synth_store), synth_store)
    assert plain.settings.tools == DEFAULT_TOOLS and plain.call("get_price_data", {"symbol": task.pool[0]})[:2] == "##"


@pytest.mark.parametrize(
    ("look", "message"),
    [
        ({"tools": ["TakeAction", "nope"]}, "names unknown tools nope"),
        ({"tools": []}, "names no tool"),
        ({"prompt_set": "nope"}, "unknown prompt set 'nope'"),
    ],
)
def test_unknown_tools_or_prompt_sets_are_one_line_errors(
    synth_store: MarketStore, look: dict[str, object], message: str
) -> None:
    with pytest.raises(TradeError) as refused:
        Episode.start(_synth_task(synth_store, **look), synth_store)
    assert message in refused.value.message and "\n" not in str(refused.value)
    known = "TakeAction" if "tools" in look else "compact"
    assert refused.value.hint and known in refused.value.hint  # it names the known ones


class _Crashing(Tool):
    """A plugin's tool with a bug: ``run`` raises what ``crash`` raises."""

    name = "crashing"
    description = "崩溃"
    arguments = Arguments

    def __init__(self, crash: Callable[[], object]) -> None:
        self.crash = crash

    def run(self, episode: Episode, args: Arguments) -> str:
        self.crash()
        return "不会到这里"


@pytest.mark.parametrize(
    ("crash", "shown"), [(lambda: 1 / 0, "ZeroDivisionError"), (lambda: sys.exit(7), "SystemExit")], ids=["bug", "exit"]
)
def test_a_tool_that_raises_or_exits_answers_an_internal_error(
    synth_store: MarketStore, crash: Callable[[], object], shown: str
) -> None:
    """``sys.exit`` in a tool is a bug like any other: counted and answered as text, never the rollout worker's end."""

    class Plugin:
        @hookimpl
        def trade_register_tools(self, register):  # type: ignore[no-untyped-def]
            register(_Crashing(crash))

    with inline_plugin(get_manager(), Plugin(), "crashing-tool"):
        settings = EpisodeSettings(tools=(*DEFAULT_TOOLS, "crashing"))
        day = Episode.start(_synth_task(synth_store), synth_store, settings=settings)
        assert day.call("crashing", {}) == f"错误：工具内部错误（{shown}），请换一种调用"
    assert (day.internal_errors, day.tool_errors, day.status) == (1, 1, "open")
