"""The llm policy over a real TradingDay on the real data, against the fault-injecting server on a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from trade_data.store import MarketStore
from trade_eval.policies.llm import LLMPolicy
from trade_eval.policy import DayUsage, PolicyUnavailable, RunSettings
from trade_eval.testing import LOOP, STOP, Behaviour, Drop, Fail, FaultServer, Reply
from trade_tools.day import TradingDay
from trade_tools.episode import EpisodeSettings
from trade_tools.sampler import day_task

DATE = "2025-06-20"
MALFORMED = '{"type": "stop", "reasoning": '


@contextlib.contextmanager
def debug_logs() -> Iterator[None]:
    """structlog passing debug events within the block, whatever level an earlier test configured (the CLI's
    info drops ``llm.reply``)."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield
    finally:
        structlog.configure(wrapper_class=wrapper)


def play(
    store: MarketStore, script: list[Behaviour], default: Behaviour = STOP, max_turns: int = 16, **options: Any
) -> tuple[TradingDay, DayUsage, FaultServer]:
    """Play one real day with the llm policy against a server answering with ``script``, then ``default``."""
    day = TradingDay.start(day_task(store, DATE, pool_size=5), store, settings=EpisodeSettings(max_turns=max_turns))
    with FaultServer(script, default) as server:
        settings = RunSettings(model="trader", base_url=server.url, options={"backoff": 0.01}, **options)
        usage = asyncio.run(LLMPolicy().play(day, settings))
    return day, usage, server


def test_two_tasks_of_one_day_are_sampled_apart_and_a_replay_the_same(sample_store: MarketStore) -> None:
    """The request seed follows the task (run seed, task, reply), not the date: ``--per-day`` tasks of one T0
    get their own streams, and the same task asks with the same seeds again (a resumed run samples alike)."""
    from trade_eval.policies.llm import chat_request

    days = [TradingDay.start(day_task(sample_store, DATE, pool_size=5, seed=s), sample_store) for s in (0, 1, 0)]
    assert days[0].episode.task.task_id != days[1].episode.task.task_id
    seeds = [chat_request(day, RunSettings(model="m", seed=3), [])["seed"] for day in days]
    assert seeds[0] != seeds[1] and seeds[0] == seeds[2]


@pytest.mark.parametrize("anonymized", [False, True], ids=["plain", "anonymized"])
@pytest.mark.parametrize(
    "sampling", [{}, {"top_p": 0.9, "max_tokens": 512, "temperature": 0.0}], ids=["defaults", "every key"]
)
def test_each_request_is_sent_as_the_json_of_its_chat_request(
    sample_store: MarketStore, anonymized: bool, sampling: dict[str, Any]
) -> None:
    """The bytes sent, each message and the tool schemas encoded once, are those of ``json.dumps`` of the whole
    request, after each kind of turn (tool calls, reasoning, text with quotes, a reply without a call)."""
    from trade_eval.policies.llm import EncodedRequest, chat_request

    task = day_task(sample_store, DATE, pool_size=5).model_copy(update={"anonymized": anonymized})
    day = TradingDay.start(task, sample_store)
    settings = RunSettings(model='trader "v2" 模型', seed=7, **sampling)
    encoded = EncodedRequest(day, settings)

    def expected() -> bytes:
        return json.dumps(chat_request(day, settings, day.episode.tool_schemas()), ensure_ascii=False).encode()

    assert encoded.next() == expected()
    day.turn("<think>\n先看大盘。\n</think>\n\n好", [("get_macro_indicators", '{"index": "SH000300"}')])
    assert encoded.next() == expected()
    day.turn('说 "引号" \\ 与\n换行', [("get_macro_indicators", "{broken"), ("no_such_tool", "")])
    assert encoded.next() == encoded.next() == expected()  # a retry sends the same bytes
    day.turn("没有调用", [])
    assert encoded.next() == expected()


def test_a_day_is_played_with_the_episode_tools_and_the_run_sampling(sample_store: MarketStore) -> None:
    with debug_logs(), structlog.testing.capture_logs() as logs:
        day, usage, server = play(sample_store, [LOOP], temperature=0.7, top_p=0.9, max_tokens=512)
    assert (day.episode.status, day.episode.status_reason, day.episode.turns) == ("stopped", "TakeAction(stop)", 2)
    first, second = server.requests
    assert first["tools"] == day.episode.tool_schemas() and first["tool_choice"] == "auto"
    assert (first["model"], first["temperature"], first["top_p"], first["max_tokens"]) == ("trader", 0.7, 0.9, 512)
    assert first["seed"] != second["seed"]  # one seed per reply, derived from the run's
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][2]["tool_calls"][0]["function"]["name"] == "get_macro_indicators"
    assert "上证指数" in second["messages"][3]["content"]
    assert (usage.requests, usage.retries, usage.warnings) == (2, 0, [])
    assert usage.prompt_tokens > 1000 and usage.completion_tokens > 0
    assert all(h["Authorization"] == "Bearer EMPTY" and h["Content-Type"] == "application/json" for h in server.headers)
    replies = [e for e in logs if e["event"] == "llm.reply"]
    assert [(e["day"], e["turn"], e["finish_reason"]) for e in replies] == [
        (DATE, 1, "tool_calls"),
        (DATE, 2, "tool_calls"),
    ]
    assert all(e["latency_s"] >= 0 and e["prompt_tokens"] > 0 for e in replies)


@pytest.mark.parametrize(
    "faults",
    [[Fail(500), Fail(503)], [Drop(), Drop()], [Fail(429), Drop()]],
    ids=["5xx", "dropped mid-answer", "rate-limited"],
)
def test_server_failures_are_retried_then_the_day_goes_on(sample_store: MarketStore, faults: list[Behaviour]) -> None:
    with structlog.testing.capture_logs() as logs:
        day, usage, server = play(sample_store, faults)
    assert day.episode.status == "stopped" and (usage.requests, usage.retries) == (3, 2)
    assert len(server.requests) == 3 and [e["event"] for e in logs].count("llm.request_failed") == 2


def test_a_server_that_keeps_failing_makes_the_policy_unavailable(sample_store: MarketStore) -> None:
    with pytest.raises(PolicyUnavailable) as raised:
        play(sample_store, [], Fail(502, "upstream\nbroken"), retries=2)
    assert str(raised.value) == "turn 1: HTTP 502 (upstream broken) after 3 attempts"
    assert (raised.value.usage.requests, raised.value.usage.retries) == (3, 2)  # the failed day's cost is kept


def test_answers_slower_than_the_timeout_are_retried_then_unavailable(sample_store: MarketStore) -> None:
    slow = Reply(calls=STOP.calls, delay=5)
    day, usage, _ = play(sample_store, [slow], request_timeout=0.2)
    assert day.episode.status == "stopped" and (usage.requests, usage.retries) == (2, 1)
    with pytest.raises(PolicyUnavailable, match=r"^turn 1: no answer within 0.2 s after 2 attempts$"):
        play(sample_store, [], slow, request_timeout=0.2, retries=1)


def test_malformed_tool_arguments_reach_the_episode_unchanged(sample_store: MarketStore) -> None:
    day, usage, server = play(sample_store, [Reply(calls=(("TakeAction", MALFORMED),))])
    reply, answer = day.messages[2:4]
    assert reply.tool_calls is not None and reply.tool_calls[0].function.arguments == MALFORMED
    assert answer.content.startswith("错误：") and day.episode.tool_errors == 1
    assert server.requests[1]["messages"][2]["tool_calls"][0]["function"]["arguments"] == MALFORMED
    assert day.episode.status == "stopped" and usage.warnings == []


def test_a_reply_without_a_tool_call_fails_the_day(sample_store: MarketStore) -> None:
    day, usage, _ = play(sample_store, [Reply(content="今天不交易。")])
    assert (day.episode.status, day.episode.status_reason) == ("failed", "回复中没有工具调用")
    assert day.messages[-1].content == "今天不交易。" and usage.requests == 1


def test_a_reply_the_server_s_parser_dropped_is_warned_about(sample_store: MarketStore) -> None:
    """vLLM's qwen3_coder parser returns nothing of a hermes JSON call (no text, no call): the day ends as any
    reply without a call does, and the record says the model wrote tokens the server dropped."""
    with structlog.testing.capture_logs() as logs:
        day, usage, _ = play(sample_store, [Reply(tokens=28)])
    assert (day.episode.status, day.episode.status_reason) == ("failed", "回复中没有工具调用")
    assert usage.warnings == [
        "turn 1: the reply is empty though the model wrote 28 tokens: the server's tool-call parser dropped a call "
        "it could not read (vLLM's qwen3_coder drops hermes JSON calls; see `trade eval serve`)"
    ]
    assert [e["completion_tokens"] for e in logs if e["event"] == "llm.reply_dropped"] == [28]
    _, usage, _ = play(sample_store, [Reply(tokens=1)])  # only the end token: the model said nothing
    assert usage.warnings == []


def test_an_endless_tool_loop_ends_at_the_turn_limit(sample_store: MarketStore) -> None:
    day, usage, _ = play(sample_store, [], LOOP, max_turns=3)
    assert (day.episode.status, day.episode.status_reason, usage.requests) == ("truncated", "超过3轮仍未停止", 3)


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "TakeAction", "arguments": {"type": "stop"}}\n</tool_call>',
        "<tool_call>\n<function=TakeAction>\n<parameter=type>\nstop\n</parameter>\n</function>\n</tool_call>",
        "<function=TakeAction>\n<parameter=type>\nstop\n</parameter>\n</function>",
        '{"name": "TakeAction", "arguments": {"type": "stop"}}\n</tool_call>',
    ],
    ids=["hermes", "qwen3_coder", "bare function", "opening tag missing"],
)
@pytest.mark.parametrize("where", ["content", "reasoning"])
def test_tool_call_markup_left_as_text_is_warned_about(sample_store: MarketStore, text: str, where: str) -> None:
    """In the text, or in the reasoning: vLLM's qwen3 reasoning parser returns a reply that opens neither
    <think> nor <tool_call> as reasoning to its end (the call's opening tag missing, say)."""
    with structlog.testing.capture_logs() as logs:
        day, usage, _ = play(sample_store, [Reply(**{where: text})])
    assert day.episode.status == "failed" and len(usage.warnings) == 1
    assert "tool-call markup" in usage.warnings[0] and "trade eval serve" in usage.warnings[0]
    assert [e["turn"] for e in logs if e["event"] == "llm.tool_markup_as_text"] == [1]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(reasoning="先看大盘。", calls=LOOP.calls),
        Reply(reasoning="先看大盘。", reasoning_field="reasoning", calls=LOOP.calls),
        Reply(content="<think>\n先看大盘。\n</think>\n\n", calls=LOOP.calls),
        Reply(content="先看大盘。\n</think>\n\n", calls=LOOP.calls),
    ],
    ids=["reasoning_content", "reasoning", "think text", "think opened by the template"],
)
def test_reasoning_is_kept_and_replayed_as_the_qwen3_template_reads_it(sample_store: MarketStore, reply: Reply) -> None:
    day, _, server = play(sample_store, [reply])
    recorded = day.messages[2]
    assert (recorded.reasoning_content, recorded.content) == ("先看大盘。", "")
    replayed = server.requests[1]["messages"][2]
    assert replayed["content"] == "<think>\n先看大盘。\n</think>\n\n" and "reasoning_content" not in replayed
    trajectory = json.loads(day.to_trajectory("backtest").model_dump_json())
    assert trajectory["messages"][2]["reasoning_content"] == "先看大盘。"


def test_a_refused_request_truncates_a_played_day_and_a_refused_first_one_is_unavailable(
    sample_store: MarketStore,
) -> None:
    too_long = Fail(400, "This model's maximum context length is 2048 tokens.")
    day, usage, _ = play(sample_store, [LOOP, too_long])
    assert (day.episode.status, day.episode.status_reason, usage.requests) == (
        "truncated",
        "服务器拒绝了第2轮的请求",
        2,
    )
    assert usage.warnings == [
        "turn 2: the server refused the request, HTTP 400 (This model's maximum context length is 2048 tokens.); "
        "the day ends truncated"
    ]
    with pytest.raises(PolicyUnavailable, match=r"^the server refused the day's first request: HTTP 404 \(no model\)$"):
        play(sample_store, [Fail(404, "no model")])


def test_a_backoff_that_is_not_seconds_is_refused(sample_store: MarketStore) -> None:
    from trade_core.errors import TradeError

    day = TradingDay.start(day_task(sample_store, DATE, pool_size=5), sample_store)
    with pytest.raises(TradeError, match="backoff 'soon' is not a number of seconds"):
        asyncio.run(
            LLMPolicy().play(day, RunSettings(model="m", base_url="http://127.0.0.1:9/v1", options={"backoff": "soon"}))
        )


def test_calls_a_server_parsed_but_left_in_the_text_are_not_kept_twice(sample_store: MarketStore) -> None:
    """`transformers serve` returns the parsed calls and their markup in the text: replayed as they came, the
    Qwen3 template rendered every call twice."""
    markup = '<tool_call>\n{"name": "get_macro_indicators", "arguments": {}}\n</tool_call>'
    day, usage, server = play(sample_store, [Reply(content=f"先看大盘。\n{markup}", calls=LOOP.calls)])
    assert day.messages[2].content == "先看大盘。" and usage.warnings == []
    assert server.requests[1]["messages"][2]["content"] == "先看大盘。"
