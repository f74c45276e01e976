"""Tool calls read from generated text in both Qwen formats, as the serving parsers read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trade_core.errors import TradeError
from trade_tools.day import TradingDay
from trade_tools.tool import TOOLS
from trade_tools.toolcalls import FORMATS, HERMES, QWEN3_CODER, STATED_FORMAT, ModelFormat, model_format, parse_reply

SCHEMAS = [tool.schema() for tool in TOOLS.all().values()]
STOP = '<tool_call>\n{"name": "TakeAction", "arguments": {"type": "stop", "reasoning": "观望"}}\n</tool_call>'
MACRO = '<tool_call>\n{"name": "get_macro_indicators", "arguments": {}}\n</tool_call>'
XML_BUY = (
    "<tool_call>\n<function=TakeAction>\n<parameter=type>\nbuy\n</parameter>\n<parameter=symbol>\nSH600519\n"
    "</parameter>\n<parameter=amount>\n100\n</parameter>\n</function>\n</tool_call>"
)


def test_hermes_reads_every_call_in_order_and_keeps_the_text_around_them() -> None:
    parsed = parse_reply(f"</think>\n先看大盘。\n{MACRO}\n{STOP}\n完毕", HERMES)
    assert parsed.calls == [
        ("get_macro_indicators", "{}"),
        ("TakeAction", '{"type": "stop", "reasoning": "观望"}'),
    ]
    assert (parsed.reasoning, parsed.content) == (None, "先看大盘。\n完毕")


def test_a_malformed_hermes_call_stays_text_beside_the_good_ones() -> None:
    broken = '<tool_call>\n{"name": "TakeAction", "arguments": {"type": "buy",}\n</tool_call>'
    nameless = '<tool_call>{"arguments": {}}</tool_call>'
    parsed = parse_reply(f"{broken}{nameless}{MACRO}", HERMES)
    assert parsed.calls == [("get_macro_indicators", "{}")]
    assert parsed.content == broken + nameless


@pytest.mark.parametrize("text", [STOP.removesuffix("</tool_call>"), "<tool_call>", "</think>没有调用"])
def test_an_unclosed_or_missing_hermes_call_is_no_call(text: str) -> None:
    parsed = parse_reply(text, HERMES)
    assert parsed.calls == [] and parsed.content == text.removeprefix("</think>").strip()


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        ("先看大盘，再决定。", "先看大盘，再决定。", ""),  # neither </think> nor <tool_call>: reasoning to the end
        (f"先看大盘。\n{MACRO}\n完毕", "先看大盘。", "完毕"),  # a call ends the reasoning
        ("<think>\n想一想\n</think>\n\n观望</think>", "想一想", "观望"),  # a second </think> is dropped
    ],
)
def test_a_reply_is_split_as_vllm_s_qwen3_reasoning_parser_splits_it(text: str, reasoning: str, content: str) -> None:
    """With thinking on, vLLM reads a reply from its start as reasoning, until </think> or the first <tool_call>
    (what users of the tutorial's server get; test_vllm.py compares with vLLM's own parser)."""
    parsed = parse_reply(text, HERMES)
    assert (parsed.reasoning, parsed.content) == (reasoning, content)


def test_arguments_that_are_not_an_object_go_on_as_written_for_the_episode_to_refuse() -> None:
    parsed = parse_reply('<tool_call>{"name": "TakeAction", "arguments": "type=stop"}</tool_call>', HERMES)
    assert parsed.calls == [("TakeAction", '"type=stop"')]


def test_reasoning_is_split_off_and_a_call_ends_it_even_inside_the_think_block() -> None:
    """vLLM's parser (and verl's, which reads every block) takes a call written while thinking as a call."""
    parsed = parse_reply(f"<think>\n也许 {MACRO}\n</think>\n\n{STOP}", HERMES)
    assert parsed.reasoning == "也许"
    assert [name for name, _ in parsed.calls] == ["get_macro_indicators", "TakeAction"] and parsed.content == ""
    opened_by_the_prompt = parse_reply(f"想一想\n</think>\n\n{STOP}", HERMES)
    assert opened_by_the_prompt.reasoning == "想一想" and len(opened_by_the_prompt.calls) == 1


def test_qwen3_coder_converts_values_by_the_schema_and_reads_several_calls() -> None:
    indicators = (
        "<tool_call>\n<function=get_price_data>\n<parameter=symbol>\nSH600519\n</parameter>\n"
        '<parameter=indicators>\n["MA5", "RSI_14"]\n</parameter>\n</function>\n</tool_call>'
    )
    parsed = parse_reply(f"</think>买入。\n{XML_BUY}\n{indicators}", QWEN3_CODER, SCHEMAS)
    assert [(name, json.loads(arguments)) for name, arguments in parsed.calls] == [
        ("TakeAction", {"type": "buy", "symbol": "SH600519", "amount": 100}),
        ("get_price_data", {"symbol": "SH600519", "indicators": ["MA5", "RSI_14"]}),
    ]
    assert parsed.content == "买入。"


def test_qwen3_coder_keeps_a_value_that_is_not_its_type_and_reads_a_call_cut_off_at_the_end() -> None:
    cut = "<tool_call>\n<function=TakeAction>\n<parameter=type>\nbuy\n</parameter>\n<parameter=amount>\n一百"
    parsed = parse_reply(cut, QWEN3_CODER, SCHEMAS)
    assert parsed.calls == [("TakeAction", '{"type": "buy", "amount": "一百"}')] and parsed.content == ""


def test_a_qwen3_coder_block_without_a_function_stays_text() -> None:
    text = "<tool_call>\nTakeAction(type=stop)\n</tool_call>"
    assert parse_reply(text, QWEN3_CODER, SCHEMAS) == (None, text, [])
    assert parse_reply(STOP, QWEN3_CODER, SCHEMAS).calls == []  # the other family's format is no call


def folder(tmp_path: Path, name: str, config: dict[str, object]) -> Path:
    (tmp_path / name).mkdir()
    (tmp_path / name / "config.json").write_text(json.dumps(config))
    return tmp_path / name


def test_the_format_follows_the_model_family_or_what_the_folder_states(tmp_path: Path) -> None:
    assert model_format(folder(tmp_path, "a", {"model_type": "qwen3"})) == ModelFormat(HERMES, thinks=True)
    qwen3_5 = folder(tmp_path, "b", {"architectures": ["Qwen3_5MoeForConditionalGeneration"]})
    assert model_format(qwen3_5) == ModelFormat(QWEN3_CODER, thinks=True)
    assert set(FORMATS.values()) == {HERMES, QWEN3_CODER}
    # a llama writes no hermes calls, unless its folder says it does (the bases `trade model` builds)
    with pytest.raises(TradeError, match="model family 'llama'") as error:
        model_format(folder(tmp_path, "c", {"model_type": "llama"}), hint="pass --format NAME")
    assert error.value.hint and error.value.hint.endswith("; pass --format NAME")
    stated = folder(tmp_path, "d", {"model_type": "llama", STATED_FORMAT: HERMES})
    assert model_format(stated) == ModelFormat(HERMES, thinks=False)
    with pytest.raises(TradeError, match=r"no config\.json"):
        model_format(tmp_path / "none")
    with pytest.raises(TradeError, match="format"):
        parse_reply(STOP, "json")


def test_parsed_calls_play_on_the_episode_with_its_chinese_errors(open_day) -> None:  # type: ignore[no-untyped-def]
    day = TradingDay(open_day("2024-06-14", ["SH600519", "SZ000001"]))
    bad = parse_reply('<tool_call>{"name": "TakeAction", "arguments": "type=stop"}</tool_call>', HERMES)
    assert day.turn(bad.content, bad.calls)[0].startswith("错误：参数必须是JSON对象") and day.is_open
    malformed = parse_reply('<tool_call>{"name": "TakeAction", "arguments": {</tool_call>', HERMES)
    assert day.turn(malformed.content, malformed.calls) == []
    assert (day.episode.status, day.episode.status_reason) == ("failed", "回复中没有工具调用")
