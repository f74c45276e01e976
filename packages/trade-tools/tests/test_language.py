"""An English prompt set makes every text the model reads English; Chinese stays the default."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_tools.builtins.alpha_factor import FACTOR_GROUPS
from trade_tools.day import TradingDay
from trade_tools.episode import Episode, EpisodeSettings, Task
from trade_tools.prompts import PROMPT_SETS
from trade_tools.text import say, speaking, spoken
from trade_tools.tool import TOOLS, Arguments, Tool

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
ENGLISH_TOOLS = ("compute_alpha_factor", "TakeAction")


def _limit_up_day(store: MarketStore) -> tuple[str, str]:
    """A (symbol, day) whose close is limit-up, a few days into the synthetic market."""
    t, j = next((t, j) for t, j in np.argwhere(store.limit_up) if t >= 5)
    return store.symbols[j], str(store.calendar[t].date())


def _english_day(store: MarketStore, **kwargs: object) -> Episode:
    symbol, date = _limit_up_day(store)
    others = [s for s in store.symbols if s != symbol and not s.startswith(("SH000", "SZ399"))][:4]
    task = Task(
        task_id="en",
        date=date,  # type: ignore[arg-type]
        pool=[symbol, *others],
        holdings={others[0]: 300},
        cash=100_000.0,
        tools=list(ENGLISH_TOOLS),
        prompt_set="compact-en",
    )
    return Episode.start(task, store, **kwargs)  # type: ignore[arg-type]


def test_an_english_episode_shows_no_chinese_even_to_a_hostile_model(synth_store: MarketStore) -> None:
    day = _english_day(synth_store)
    assert day.language == "en"
    limit_up, held = day.task.pool[0], next(iter(day.task.holdings))
    texts = [m["content"] for m in day.messages()]
    texts += [json.dumps(day.tool_schemas(), ensure_ascii=False), day.tool_schemas_json()]
    calls = [
        ("compute_alpha_factor", {"expression": "ROC5"}),
        ("compute_alpha_factor", {"expression": "Mean($close, 5)/$close", "symbols": [held]}),
        ("compute_alpha_factor", '{"expression": "KMID", "symbols": ["SZ999999"]}'),
        ("compute_alpha_factor", {"expression": "ROC7"}),
        ("compute_alpha_factor", {"expression": "Foo($close)"}),
        ("compute_alpha_factor", {"expression": "Mean($close, 500)"}),
        ("compute_alpha_factor", {"expression": "If($close, 1, 2) and 1"}),
        ("compute_alpha_factor", {"expression": "$close", "symbols": []}),
        ("compute_alpha_factor", {"expression": "$close", "date": "2020-01-01"}),
        ("get_price_data", {"symbol": held}),
        ("TakeAction", "{bad json"),
        ("TakeAction", "[1]"),
        ("TakeAction", {"type": "hold"}),
        ("TakeAction", {"type": "buy", "symbol": held, "amount": 1.5}),
        ("TakeAction", {"type": "buy", "symbol": held}),
        ("TakeAction", {"type": "buy", "symbol": "SZ999999", "amount": 100}),
        ("TakeAction", {"type": "buy", "symbol": limit_up, "amount": 100}),
        ("TakeAction", {"type": "buy", "symbol": held, "amount": 150}),
        ("TakeAction", {"type": "buy", "symbol": held, "amount": 10**6}),
        ("TakeAction", {"type": "sell", "symbol": held, "amount": 10_000}),
        ("TakeAction", {"type": "sell", "symbol": held, "amount": 100}),
        ("TakeAction", {"type": "buy", "symbol": held, "amount": 100}),
        ("TakeAction", {"type": "stop", "reasoning": "done"}),
        ("TakeAction", {"type": "buy", "symbol": held, "amount": 100}),
    ]
    answers = [day.call(name, arguments) for name, arguments in calls]
    assert answers[0].startswith("## Alpha158 factor ROC5 (") and "higher = fell more over 5 days" in answers[0]
    assert answers[9].startswith("Error: unknown tool 'get_price_data'")
    assert f"{limit_up} closed limit-up: cannot buy" in answers[16]
    assert answers[-2].startswith("Trading ended for today.")
    assert answers[-1] == "Error: the trading day is over (stopped); no more tool calls"
    assert day.tool_errors >= 10 and day.internal_errors == 0
    for text in texts + answers:
        assert not CJK.search(text), text


def test_compact_en_says_what_compact_says(synth_store: MarketStore) -> None:
    day = _english_day(synth_store)
    system, user = (m["content"] for m in day.messages())
    assert system.startswith("[Synthetic data] You are") and "## Rules" in system and "## Workflow" in system
    assert "At most 16 replies today" in system and "whole lots of 100 shares" in system and "(min 5 CNY)" in system
    assert f"Trading day T0: {day.task.date}" in user and "Pool (5 stocks): " in user
    assert "Portfolio value: " in user and " CNY; cash: 100,000.00 CNY" in user
    assert PROMPT_SETS.get("compact-en").language == "en" and PROMPT_SETS.get("compact").language == "zh"


def test_chinese_stays_the_default(synth_store: MarketStore) -> None:
    day = _english_day(synth_store)
    chinese = Episode.start(day.task.model_copy(update={"prompt_set": "compact"}), synth_store)
    assert chinese.language == "zh" and spoken() == "zh"
    assert chinese.tool_schemas() == [TOOLS.all()[name].schema() for name in ENGLISH_TOOLS]
    assert all(CJK.search(m["content"]) for m in chinese.messages())
    assert chinese.call("nope", {}).startswith("错误：未知工具 'nope'")
    assert Episode.start(day.task.model_copy(update={"prompt_set": None}), synth_store).language == "zh"


def test_an_english_episode_refuses_a_tool_without_english_texts(synth_store: MarketStore) -> None:
    day = _english_day(synth_store)
    with pytest.raises(TradeError, match="tools get_price_data, get_macro_indicators have no en texts") as error:
        Episode.start(day.task.model_copy(update={"tools": None}), synth_store)
    assert "\n" not in error.value.one_line()
    settings = EpisodeSettings(prompt_set="compact-en")  # the settings' prompt set is checked as the task's is
    with pytest.raises(TradeError, match="get_price_data"):
        Episode.start(
            day.task.model_copy(update={"prompt_set": None, "tools": ["get_price_data"]}),
            synth_store,
            settings=settings,
        )
    with pytest.raises(TradeError, match="anonymized days are Chinese only"):
        Episode.start(day.task.model_copy(update={"anonymized": True}), synth_store)


def test_a_tool_speaks_chinese_unless_it_says_otherwise() -> None:
    class Old(Tool):  # a plugin tool written before languages existed
        name = "old"
        description = "旧工具"
        arguments = Arguments

        def run(self, episode: Episode, args: Arguments) -> str:
            return "好"

    assert Old.languages == ("zh",)
    for name, tool in TOOLS.all().items():
        if "en" not in tool.languages:
            continue
        function = tool.schema("en")["function"]
        described = [function["description"]] + [
            p["description"] for p in function["parameters"]["properties"].values()
        ]
        assert all(text and not CJK.search(text) for text in described), name
        assert function["parameters"] == {
            **tool.schema()["function"]["parameters"],
            "properties": function["parameters"]["properties"],
        }


def test_every_factor_meaning_has_its_english_beside_it() -> None:
    for heading, meanings in FACTOR_GROUPS:
        assert CJK.search(heading[0]) and not CJK.search(heading[1])
        for family, (zh, en) in meanings.items():
            assert not CJK.search(en) and ("{d}" in zh) == ("{d}" in en), family
            assert "越大" not in zh or "higher" in en, family


def test_say_picks_the_language_being_spoken() -> None:
    assert say("中", "en") == "中"
    with speaking("en"):
        assert say("中", "en") == "en"
        with speaking("zh"):
            assert say("中", "en") == "中"
        assert spoken() == "en"
    assert spoken() == "zh"


def test_an_english_day_ends_with_english_reasons(synth_store: MarketStore) -> None:
    """The reasons a TradingDay closes with (records, the dashboard, eval reports) follow the prompt set."""
    ends = {
        "no_call": "the reply made no tool call",
        "out_of_tokens": "over the reply budget of 640 tokens",
        "out_of_tool_turns": "tool-turn limit of 5 reached without a stop",
    }
    for method, reason in ends.items():
        day = TradingDay(_english_day(synth_store))
        getattr(day, method)(*{"out_of_tokens": [640], "out_of_tool_turns": [5]}.get(method, []))
        assert day.episode.status_reason == reason
    truncated = TradingDay(_english_day(synth_store, settings=EpisodeSettings(max_turns=1)))
    truncated.turn("", [("compute_alpha_factor", '{"expression": "KMID"}')])
    assert (truncated.episode.status, truncated.episode.status_reason) == (
        "truncated",
        "reply limit of 1 reached without a stop",
    )
