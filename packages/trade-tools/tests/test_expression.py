"""The expression whitelist: injection and look-ahead are refused before anything runs."""

from __future__ import annotations

import builtins
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trade_tools.expression import (
    MAX_LENGTH,
    MAX_WORK,
    Const,
    ExpressionError,
    Field,
    Node,
    Op,
    check_work,
    ema_tail,
    lookback,
    parse_expression,
    work,
)

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$.,()+-*/<>=!&| "


def _no_eval(*args: object, **kwargs: object) -> None:
    raise AssertionError("eval/exec called")


def parse(text: str) -> Node:
    """parse_expression with eval and exec made to fail while it runs (hypothesis itself uses exec)."""
    with patch.object(builtins, "eval", _no_eval), patch.object(builtins, "exec", _no_eval):
        return parse_expression(text)


# shared/docs/qlib-0.9.7.md §1: text that runs code, hangs or reads other data inside Qlib's eval.
INJECTIONS = [
    "$close*0+(lambda:1+1)()",
    "$close*0+((__builtins__['__import__'])('os').getpid)()",
    "$close*0+((__builtins__[__import__])(os).system)(ls)",
    "__import__('os').system('ls')",
    "__import__(os)",
    "$close+__builtins__",
    "9**9**9",
    "$close*9**9**9",
    "$close**$close",
    "$close+'a'",
    '$close+"a"',
    "$close.real",
    "$close.__class__",
    "Mean.__globals__",
    "$close[0]",
    "$$roe_q",
    "$close+$$x",
    "[x for x in $close]",
    "($close for x in $open)",
    "Mean($close, N=5)",
    "Mean(feature=$close, N=5)",
    "Mean(*$close)",
    "Mean(**$close)",
    "foo($close)",
    "eval($close)",
    "np.log($close)",
    "Operators.Mean($close,5)",
    "1+1",
    "Mean(5, 3)",
    "Abs(-1)",
    "$foo",
    "$vwap/$close",
    "$factor",
    "$change",
    "$_close",
    "$1",
    "$ close",
    "close/open",
    "_close",
    "ChangeInstrument(SH000300,$close)",
    "ChangeInstrument('SH000300',$close)",
    "Mask($close,SH000300)",
    "TResample($close,W,last)",
    "Rolling($close,5,mean)",
    "PFeature(roe)",
    "P($$roe_q)",
    "PRef($$roe_q,1)",
    "Feature(close)",
    "-$close",
    "--1*$close",
    "+1*$close",
    "not $close",
    "$close and $open",
    "$close or $open",
    "$close if $open else $high",
    "$close>$open>$low",
    "1 < 2",
    "$close in $open",
    "$close is $open",
    "$close//2",
    "$close%2",
    "$close<<2",
    "$close@$open",
    "$close & $open",
    "Not($close)",
    "$close;$open",
    "$close\n",
    "$close\x00",
    "(x:=$close)",
    "$close+1j",
    "$close+True",
    "$close+None",
    "$close+...",
    "$close*1e999",
    "$close+1/0",
    "Mean($close,5)($open)",
    "(Mean)",
    "mean($close,5)",
    "Quantile($close,5,1.5)",
    "Quantile($close,5,0)",
    "Quantile($close,5,$open)",
    "Skew($close,2)",
    "Kurt($close,3)",
    "Mean($close,251)",
    "Mean($close,5,6)",
    "Corr($close,5)",
    "If($close,$open)",
    "If(1>0,$close,$open)",
    "Abs($close,$open)",
    "",
    "   ",
    "$close+" * 60 + "$close",
    "$close" + " " * MAX_LENGTH,
    "Ｍean($close,5)",
    "$сlose",  # Cyrillic с
]


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_refused(text: str) -> None:
    with pytest.raises(ExpressionError):
        parse(text)


# shared/docs/qlib-0.9.7.md §2: forms that read after T0 in Qlib (or depend on start_time).
LOOK_AHEAD = [
    "Ref($close,-1)",
    "Ref($close,-3)",
    "Ref($close, 1-2)",
    "Ref($close,True-2)",
    "Ref($close,-(1))",
    "Ref($close,0)",
    "Ref($close,-0)",
    "Ref($close,False)",
    "Ref($close,True)",
    "Ref($close,1.0)",
    "Ref($close,1.5)",
    "Ref($close,(1))+Ref($close,-1)",
    "Delta($close,-1)",
    "Delta($close,-1)+0*Ref($close,-1)",
    "Delta($close,0)",
    "Ref($close, -2)/Ref($close, -1) - 1",
]


@pytest.mark.parametrize("text", LOOK_AHEAD)
def test_future_shift_refused_as_look_ahead(text: str) -> None:
    with pytest.raises(ExpressionError, match="可能读到T0之后的数据"):
        parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "Ref($close,~0)",
        "Mean($close,0)",
        "Mean($close,-2)",
        "Mean($close,0.5)",
        "EMA($close,0.5)",
        "Mean($close,2.0)",
        "Slope($close,-2)",
        "Resi($close,-2)",
        "Std($close,5-1)",
        "Corr($close,$open,-5)",
        "Quantile($close,-5,0.5)",
        "Rolling($close,0,mean)",
        "ChangeInstrument('SH000300',Ref($close,-1))",
    ],
)
def test_other_windows_that_qlib_misreads_are_refused(text: str) -> None:
    with pytest.raises(ExpressionError):
        parse(text)


def test_messages_say_what_to_do() -> None:
    cases = {
        "mean($close,5)": "是否想用 Mean",
        "$vwap": "$open $high $low $close $volume",
        "Ref($close,-1)": "Ref($close, 1)",
        "1+1": "没有用到任何字段",
        "-$close": "-1*x",
        "$close>$open>1": "一次只能有一个比较",
        "Mean($close, 5.0)": "须是1到250之间的整数",
    }
    for text, needle in cases.items():
        with pytest.raises(ExpressionError) as caught:
            parse(text)
        assert needle in caught.value.one_line()


def test_parses_into_qlib_operators() -> None:
    close, open_ = Field("close"), Field("open")
    assert parse("($close-$open)/$open") == Op("Div", (Op("Sub", (close, open_)), open_))
    assert parse("Quantile($close, 5, 0.8)") == Op("Quantile", (close,), (5, 0.8))
    assert parse("$close > -1.5") == Op("Gt", (close, Const(-1.5)))
    assert parse("$close*(2**3+1)") == Op("Mul", (close, Const(9.0)))
    assert parse("($close>$open) & Not($high<$low)") == Op(
        "And", (Op("Gt", (close, open_)), Op("Not", (Op("Lt", (Field("high"), Field("low"))),)))
    )
    assert parse("If($close>$open, 1, -1)").args[1:] == (Const(1.0), Const(-1.0))


def test_canonical_text_parses_back_to_the_same_tree() -> None:
    for text in ["Corr($close/Ref($close,1), Log($volume/Ref($volume, 1)+1), 60)", "If($close>=$open, $high, $low)**2"]:
        node = parse(text)
        assert parse(str(node)) == node


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("$close", 0),
        ("($close-$open)/$open", 0),
        ("Ref($close, 5)/$close", 5),
        ("Mean($close, 5)", 4),
        ("Delta($close, 3)", 3),
        ("Mean(Ref($close, 1), 20)", 20),
        ("Corr($close/Ref($close,1), Log($volume/Ref($volume, 1)+1), 60)", 60),
        ("Std(Mean($close, 5), 10)", 13),
        ("Quantile($close, 30, 0.2) + Max($high, 60)", 59),
        ("EMA($close, 12)", ema_tail(12)),
        ("EMA(Ref($close, 2), 1)", 2),
    ],
)
def test_lookback_counts_rows_before_t0(text: str, rows: int) -> None:
    assert lookback(parse(text)) == rows


def test_work_counts_rows_read_window_cells_and_operator_cost() -> None:
    """Mean($close, 5) at T0: 5 rows of the 5 fields read (5 units a row), 5 window cells of Mean (2 units a cell),
    and $close on those 5 rows (2 units a row); a call over n stocks is n times that."""
    assert work(parse("Mean($close, 5)")) == 5 * 5 + 5 * 2 + 5 * 2
    assert work(parse("Corr($close, $open, 5)")) == 5 * 5 + 5 * 17 + 2 * 5 * 2
    assert work(parse("Ref($close, 5)")) == 6 * 5 + 6 * 2 + 6 * 2
    heavy = parse("Mean(Std($close, 250), 250)")
    check_work(heavy, stocks=MAX_WORK // work(heavy))
    with pytest.raises(ExpressionError, match=f"每次调用最多{MAX_WORK:,}个"):
        check_work(heavy, stocks=MAX_WORK // work(heavy) + 1)


def test_ema_tail_drops_under_a_millionth_of_the_weight() -> None:
    for n in (2, 5, 12, 60, 250):
        decay = 1 - 2 / (n + 1)
        assert decay ** ema_tail(n) <= 1e-6 < decay ** (ema_tail(n) - 1)
    assert ema_tail(1) == 0


def test_size_limits() -> None:
    parse("+".join(["$close"] * 30))
    with pytest.raises(ExpressionError, match="表达式过大"):
        parse("+".join(["$close"] * 31))
    with pytest.raises(ExpressionError, match="表达式过长"):
        parse("$close" + "+1" * 150)
    parse("Corr(Corr(Corr($close, $open, 250), $high, 250), $low, 250)")
    with pytest.raises(ExpressionError, match="计算量过大"):
        parse("Corr(Corr(Corr(Corr(Corr($close, $open, 250), $high, 250), $low, 250), $volume, 250), $close, 250)")
    parse("$close**-10")
    with pytest.raises(ExpressionError, match="指数"):
        parse("$close**11")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=80))
def test_random_text_is_a_tree_or_a_refusal(text: str) -> None:
    _tree_or_refusal(text)


TOKENS = [
    "$close",
    "$open",
    "$volume",
    "$vwap",
    "$$x",
    "Mean(",
    "Ref(",
    "EMA(",
    "Corr(",
    "Quantile(",
    "If(",
    "Not(",
    "Greater(",
    "Abs(",
    "lambda",
    "__import__",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "**",
    ">",
    "<=",
    "==",
    "!=",
    "&",
    "|",
    "1",
    "5",
    "0",
    "-1",
    "0.5",
    "1e-12",
    "True",
    ".",
    "=",
    "x",
    " ",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=25))
def test_random_token_soup_is_a_tree_or_a_refusal(tokens: list[str]) -> None:
    _tree_or_refusal("".join(tokens))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_any_unicode_is_a_tree_or_a_refusal(text: str) -> None:
    _tree_or_refusal(text)


def _tree_or_refusal(text: str) -> None:
    try:
        node = parse(text)
    except ExpressionError:
        return
    assert isinstance(node, Op | Field)
    assert parse(str(node)) == node
