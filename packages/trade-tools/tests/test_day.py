"""The TradingDay: turns, budgets, end reasons and the conversation, as every caller of an Episode plays a day."""

from __future__ import annotations

import json
from pathlib import Path

from trade_core.testing import run_trade
from trade_tools.day import TradingDay, split_reasoning
from trade_tools.episode import MAX_TURNS, EpisodeSettings
from trade_tools.trajectory import Trajectory

POOL = ["SH600519", "SZ000001"]
MACRO = ("get_macro_indicators", "{}")


def test_every_allowed_reply_acts_then_the_day_is_truncated(open_day) -> None:  # type: ignore[no-untyped-def]
    day = TradingDay(open_day("2024-06-14", POOL, settings=EpisodeSettings(max_turns=2)))
    assert "上证指数" in day.turn("", [MACRO])[0] and day.is_open
    assert "上证指数" in day.turn("", [MACRO])[0]  # the last allowed reply still acts
    episode = day.episode
    assert (episode.status, episode.status_reason, episode.turns) == ("truncated", "超过2轮仍未停止", 2)
    assert day.turn("", [MACRO])[0].startswith("错误：本交易日已结束（已截断）")
    assert (episode.turns, episode.tool_calls, episode.tool_errors) == (2, 3, 1)  # a closed day counts no turn
    assert [m.tool_call_id for m in day.messages if m.role == "tool"] == ["call_1_0", "call_2_0", "call_3_0"]


def test_a_stop_on_the_last_reply_stops_the_day(open_day) -> None:  # type: ignore[no-untyped-def]
    day = TradingDay(open_day("2024-06-14", POOL, settings=EpisodeSettings(max_turns=1)))
    day.turn("", [("TakeAction", '{"type": "stop", "reasoning": "观望"}')])
    assert (day.episode.status, day.episode.status_reason) == ("stopped", "TakeAction(stop)")


def test_the_ends_a_caller_measures_read_in_chinese(open_day) -> None:  # type: ignore[no-untyped-def]
    ends = {
        "no_call": ("failed", "回复中没有工具调用"),
        "out_of_tokens": ("truncated", "超过8192个token的回复预算"),
        "out_of_tool_turns": ("truncated", "超过5轮工具调用仍未停止"),
    }
    for method, expected in ends.items():
        day = TradingDay(open_day("2024-06-14", POOL))
        getattr(day, method)(*{"out_of_tokens": [8192], "out_of_tool_turns": [5]}.get(method, []))
        assert (day.episode.status, day.episode.status_reason) == expected
        day.out_of_tokens(1)  # the first end stands
        assert day.episode.status_reason == expected[1]
    silent = TradingDay(open_day("2024-06-14", POOL))
    assert silent.turn("今天不调仓。", []) == [] and silent.episode.status == "failed"
    assert silent.episode.turns == 1 and silent.messages[-1].content == "今天不调仓。"


def test_the_conversation_keeps_reasoning_raw_arguments_and_texts(open_day) -> None:  # type: ignore[no-untyped-def]
    day = TradingDay(open_day("2024-06-14", POOL))
    raw = '{"symbol": "SH600519",  "period": "5d"}'
    [text] = day.turn("<think>\n先看茅台。\n</think>\n\n", [("get_price_data", raw)])
    system, user, reply, answer = day.messages
    assert (system.role, user.role) == ("system", "user") and "2024-06-14" in user.content
    assert (reply.reasoning_content, reply.content) == ("先看茅台。", "")
    assert reply.tool_calls is not None and reply.tool_calls[0].function.arguments == raw  # as written
    assert (answer.role, answer.content, answer.name) == ("tool", text, "get_price_data")
    assert answer.tool_call_id == reply.tool_calls[0].id == "call_1_0"
    record = day.to_trajectory("test", model="m")
    assert Trajectory.model_validate_json(record.model_dump_json()).model_dump() == record.model_dump()
    assert (record.source, record.model, record.task_id, record.messages) == ("test", "m", "t", day.messages)


def test_a_given_prompt_opens_the_conversation(open_day) -> None:  # type: ignore[no-untyped-def]
    prompt = [{"role": "system", "content": "系统"}, {"role": "user", "content": "开始"}]
    day = TradingDay(open_day("2024-06-14", POOL), prompt=prompt)
    assert [m.model_dump(exclude_none=True) for m in day.messages] == prompt


def test_replies_split_reasoning_from_the_answer() -> None:
    assert split_reasoning("<think>\n先看大盘。\n</think>\n\n买入") == ("先看大盘。", "买入")
    assert split_reasoning("没有思考") == (None, "没有思考")


def test_play_truncates_after_the_last_allowed_reply_as_training_does(sample_dataset: Path) -> None:
    """`trade tools play` counted turns itself and left a day open after its last allowed reply."""
    script = "get_macro_indicators {}\n" * MAX_TURNS
    run = run_trade(
        "tools", "play", "--data", str(sample_dataset), "--date", "2024-06-14", "--pool", ",".join(POOL), input=script
    )
    assert run.code == 1 and "状态：truncated" in run.out, run.out[-300:]
    assert run.err.count("the day is over (truncated)") == 1


def test_play_saves_the_days_conversation(sample_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "day.jsonl"
    run_trade(
        "tools",
        "play",
        "--data",
        str(sample_dataset),
        "--date",
        "2024-06-14",
        "--pool",
        ",".join(POOL),
        "--save",
        str(out),
        input="get_macro_indicators {}\nstop 观望\n",
    )
    messages = json.loads(out.read_text())["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["call_1_0", "call_2_0"]
