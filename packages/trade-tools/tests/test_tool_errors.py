"""What a hostile or careless model sends: every answer is a short Chinese tool text, and no call is costly."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trade_data.store import MarketStore
from trade_tools.alpha import alpha158, resolve
from trade_tools.expression import FIELDS, MAX_WORK, OPERATORS, ExpressionError, parse_expression, work
from trade_tools.indicators import INDICATORS
from trade_tools.tool import TOOLS, Tool

DATE = "2024-06-14"
POOL = ["SH600519", "SZ000001", "SH600036", "SZ300750"]
BIG = "A" * 1_000_000
WORD = re.compile(r"[A-Za-z]{2,}")
# Names the model itself writes may stay Latin: tools, arguments, fields, operators, indicators, factors.
NAMES = set(WORD.findall(" ".join([*TOOLS.all(), *OPERATORS, *FIELDS, *INDICATORS, *alpha158(), "Alpha", "JSON"])))
NAMES |= {key for tool in TOOLS.all().values() for key in tool.arguments.model_fields}
NAMES |= {"buy", "sell", "stop", "true", "false"}


def english(text: str) -> list[str]:
    """Latin words of ``text`` that are not names the model uses, leaving out $fields and quoted echoes of its input."""
    bare = re.sub(r"'[^']*'|\"[^\"]*\"|\$\w+|\b(?:SH|SZ|BJ)\d+", "", text)
    return [word for word in WORD.findall(bare) if word not in NAMES]


def budget(name: str) -> int:
    tool = TOOLS.all().get(name)
    return tool.budget if tool else Tool.budget


HOSTILE = [
    ("get_price_data", {"symbol": BIG}),
    ("get_price_data", {"symbol": "SH600519", BIG: 1}),
    ("get_price_data", {"symbol": "SH600519", "period": BIG}),
    ("get_price_data", {"symbol": "SH600519", "indicators": [BIG]}),
    ("get_macro_indicators", {"index": BIG}),
    ("compute_alpha_factor", {"expression": BIG, "symbols": POOL}),
    ("compute_alpha_factor", {"expression": "Mean($close, 5)", "symbols": [BIG]}),
    ("compute_alpha_factor", {"expression": "".join(map(chr, range(0x4E00, 0x4E00 + 290))), "symbols": POOL}),
    ("TakeAction", {"type": "buy", "symbol": BIG, "amount": 100}),
    ("TakeAction", {"type": BIG}),
    (BIG, {}),
    ("TakeAction", BIG),
]


@pytest.mark.parametrize(("name", "arguments"), HOSTILE, ids=range(len(HOSTILE)))
def test_every_text_respects_the_budget_errors_included(open_day, name: str, arguments: object) -> None:  # type: ignore[no-untyped-def]
    day = open_day(DATE, POOL)
    text = day.call(name, arguments if isinstance(arguments, str) else json.dumps(arguments))
    assert text.startswith(("错误：", "订单被拒绝：")) and len(text) <= budget(name), text[:200]
    assert day.internal_errors == 0


@pytest.mark.parametrize("case", [0, 1, 2, 5, 6, 8, 10])
def test_echoed_input_is_cut_short(open_day, case: int) -> None:  # type: ignore[no-untyped-def]
    name, arguments = HOSTILE[case]
    text = open_day(DATE, POOL).call(name, json.dumps(arguments))
    assert max(map(len, re.findall("A+", text))) <= 40, text[:200]


def test_a_wrong_symbol_lists_a_few_pool_entries_and_the_count(open_day, sample_store: MarketStore) -> None:  # type: ignore[no-untyped-def]
    pool = [s for s in sample_store.asof(DATE).members("csi300")]
    text = open_day(DATE, pool).call("get_price_data", {"symbol": "SH601398X"})
    assert text.startswith("错误：SH601398X 不在股票池中") and f"共{len(pool)}只" in text
    assert sum(symbol in text for symbol in pool) <= 10 and len(text) <= 300


HUGE = [
    '{"type": "buy", "symbol": "SH600519", "amount": 1' + "0" * 309 + "}",
    '{"type": "buy", "symbol": "SH600519", "amount": "1' + "0" * 309 + '"}',
    '{"type": "sell", "symbol": "SH600519", "amount": -1' + "0" * 309 + "}",
    '{"type": "buy", "symbol": "SH600519", "amount": 1' + "0" * 5000 + "}",
    '{"type": "buy", "symbol": "SH600519", "amount": 1e400}',
    "[" * 100_000 + "]" * 100_000,
    '{"type": "stop", "reasoning": ' + "[" * 100_000 + "]" * 100_000 + "}",
    {"type": "buy", "symbol": "SH600519", "amount": 10**5000},
    {"type": "buy", "symbol": "SH600519", "amount": -(10**5000)},
]


@pytest.mark.parametrize("arguments", HUGE, ids=range(len(HUGE)))
def test_huge_numbers_and_deep_nesting_are_tool_errors(open_day, arguments: object) -> None:  # type: ignore[no-untyped-def]
    day = open_day(DATE, POOL, holdings={"SH600519": 100})
    text = day.call("TakeAction", arguments)  # type: ignore[arg-type]
    assert text.startswith(("错误：", "订单被拒绝：")) and "内部错误" not in text, text[:200]
    assert day.internal_errors == 0 and not english(text) and len(text) <= budget("TakeAction")
    assert day.cash == 1_000_000 and day.positions["SH600519"].shares == 100


WRONG = [
    ("TakeAction", '{"type": "buy", "symbol": "SH600519", "amount": "x"}', "amount"),
    ("TakeAction", '{"type": "buy", "symbol": "SH600519", "amount": 100.5}', "amount"),
    ("TakeAction", '{"type": "hold"}', "type"),
    ("TakeAction", '{"type": "stop", "reasoning": 3}', "reasoning"),
    ("TakeAction", '{"type": "stop", "reasoning": "' + "想" * 2001 + '"}', "reasoning"),
    ("TakeAction", "{}", "type"),
    ("get_price_data", '{"symbol": ["SH600519"]}', "symbol"),
    ("get_price_data", '{"symbol": "SH600519", "period": 20}', "period"),
    ("get_price_data", '{"symbol": "SH600519", "indicators": "MA5"}', "indicators"),
    ("get_price_data", '{"symbol": "SH600519", "start_date": "2024-01-01"}', "start_date"),
    ("compute_alpha_factor", '{"expression": "KMID", "symbols": "SH600519"}', "symbols"),
    ("compute_alpha_factor", '{"expression": {"a": 1}, "symbols": ["SH600519"]}', "expression"),
    ("get_price_data", '{"symbol": "SH600519",}', "JSON"),
    ("get_price_data", "{'symbol': 'SH600519'}", "JSON"),
    ("get_price_data", '{"symbol": "SH600519"} x', "JSON"),
    ("get_price_data", '{"symbol": "SH6005', "JSON"),
]


@pytest.mark.parametrize(("name", "arguments", "about"), WRONG, ids=range(len(WRONG)))
def test_argument_errors_are_chinese(open_day, name: str, arguments: str, about: str) -> None:  # type: ignore[no-untyped-def]
    text = open_day(DATE, POOL).call(name, arguments)
    assert text.startswith("错误：") and about in text and not english(text), text


TOO_COSTLY = "Corr(Corr(Corr(Corr(Corr($close,$open,250),$high,250),$low,250),$volume,250),$close,250)"
REFUSED = [
    "Ref($close,-3)",
    "mean($close,5)",
    "$vwap",
    "1+1",
    "-$close",
    "$close>$open>1",
    "Mean($close, 5.0)",
    "FOO1",
    "VWAP0",
    "$close.real",
    "Mean($close)",
    "Mean(x=$close, N=5)",
    "Skew($close, 2)",
    "Quantile($close, 5, 2)",
    "$close ** 11",
    "$$roewa_q",
    "_close",
    "$close if 1 else 2",
    "Abs(1)",
    "And($close, $open)",
    "Not($close)",
    "Mean",
    "1/0 + $close",
    "Mean($close, 5) +",
    "'a'",
    "$close\n",
    "+".join(["$close"] * 31),
    "$close" + "+1" * 150,
    TOO_COSTLY,
    "Ref($close, 1)[0]",
    "[$close]",
    "$close and 1",
    "lambda: $close",
]


@pytest.mark.parametrize("expression", REFUSED)
def test_expression_refusals_reach_the_model_in_chinese(open_day, expression: str) -> None:  # type: ignore[no-untyped-def]
    text = open_day(DATE, POOL).call("compute_alpha_factor", {"expression": expression, "symbols": POOL})
    assert text.startswith("错误：表达式被拒绝：") and not english(text), text


TOKENS = [
    "$close",
    "$vwap",
    "Mean(",
    "Ref(",
    "Corr(",
    "Quantile(",
    "If(",
    "mean(",
    "lambda",
    "(",
    ")",
    ",",
    "+",
    "-",
    "**",
    ">",
    "==",
    "&",
    "1",
    "-1",
    "0.5",
    "True",
    ".",
    "=",
    "x",
    " ",
    "'",
    "[",
    "_",
    "$$a",
    "#",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=20))
def test_any_refusal_is_chinese(tokens: list[str]) -> None:
    try:
        resolve("".join(tokens))
    except ExpressionError as error:
        assert not english(error.one_line()), error.one_line()


WORST = "Corr(Ref(Var(Cov($close,$high,250),250),200),$close,200)"


def test_one_factor_call_is_capped_across_all_its_stocks(open_day, sample_store: MarketStore) -> None:  # type: ignore[no-untyped-def]
    """The cap is a work estimate (stocks x rows x window x operator cost), so it refuses the same calls anywhere."""
    per_stock = work(parse_expression(WORST))
    most = MAX_WORK // per_stock
    pool = sample_store.asof(DATE).members("csi300")[:30]
    assert 1 <= most < 30
    day = open_day(DATE, pool)
    text = day.call("compute_alpha_factor", {"expression": WORST, "symbols": pool[: most + 1]})
    assert text.startswith("错误：") and "计算量过大" in text and f"{MAX_WORK:,}" in text and "减少股票数量" in text
    assert not english(text) and day.internal_errors == 0
    assert f"{most}. " in day.call("compute_alpha_factor", {"expression": WORST, "symbols": pool[:most]})
    assert "30. " in day.call("compute_alpha_factor", {"expression": "CORR60", "symbols": pool})


def test_an_expression_too_costly_for_one_stock_is_refused_at_parse() -> None:
    with pytest.raises(ExpressionError, match="计算量过大") as caught:
        parse_expression(TOO_COSTLY)
    assert f"{MAX_WORK:,}" in caught.value.one_line()
