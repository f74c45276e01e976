"""A model trained on the tutorial's reference implementation plays here: its four tools' names and arguments
(`docs/reference-system.md` in ../shared), and the calls such a model writes, are all accepted."""

from __future__ import annotations

import pytest

from trade_tools.builtins.alpha_factor import AlphaArgs
from trade_tools.episode import Episode
from trade_tools.tool import TOOLS

REFERENCE = {
    "get_price_data": {"symbol", "period", "indicators"},
    "get_macro_indicators": {"index", "period"},
    "compute_alpha_factor": {"expression", "symbols", "period"},
    "TakeAction": {"type", "symbol", "amount", "reasoning"},
}
"""Each reference tool and the arguments its schema names."""

POOL = ["SH600519", "SZ000001"]
CALLS = [
    ("get_price_data", {"symbol": "SH600519", "period": "20d", "indicators": ["MA5", "RSI_14", "MACD_DIF"]}),
    ("get_price_data", {"symbol": "SZ000001", "period": "60d"}),
    ("get_macro_indicators", {"index": "SH000300", "period": "20d"}),
    ("get_macro_indicators", {}),
    ("compute_alpha_factor", {"expression": "Mean($close,5)/$close", "symbols": POOL, "period": "60d"}),
    ("compute_alpha_factor", {"expression": "ROC20", "period": "120d"}),
    ("compute_alpha_factor", {"expression": "$close/Ref($close,20)-1", "symbols": POOL}),
    ("TakeAction", {"type": "buy", "symbol": "SZ000001", "amount": 1000, "reasoning": "动量向上"}),
    ("TakeAction", {"type": "stop", "reasoning": "完成调仓"}),
]
"""What a reference-trained model writes: its schemas' arguments, with and without their defaults."""


def test_every_reference_tool_takes_the_reference_s_arguments() -> None:
    """Every argument the reference names is one of ours (compute_alpha_factor's ``period`` without a place in
    the schema: it changes no value)."""
    tools = TOOLS.all()
    for name, arguments in REFERENCE.items():
        assert arguments <= set(tools[name].arguments.model_fields), name
    assert AlphaArgs.model_fields["period"].default == "60d"  # the reference's default


def test_a_reference_trained_model_s_calls_are_all_accepted(open_day) -> None:  # type: ignore[no-untyped-def]
    episode: Episode = open_day("2024-06-14", POOL)
    for name, arguments in CALLS:
        answer = episode.call(name, arguments)
        assert not answer.startswith("错误"), (name, arguments, answer)
    assert episode.tool_errors == 0 and episode.status == "stopped"


@pytest.mark.parametrize("period", ["0d", "251d", "abc"])
def test_a_period_out_of_range_is_the_model_s_error(open_day, period: str) -> None:  # type: ignore[no-untyped-def]
    episode: Episode = open_day("2024-06-14", POOL)
    answer = episode.call("compute_alpha_factor", {"expression": "ROC20", "period": period})
    assert answer.startswith(f"错误：period '{period}' 无效")


def test_the_period_does_not_change_the_value_at_t0(open_day) -> None:  # type: ignore[no-untyped-def]
    """The value reads the rows its windows need, whatever history the reference would have loaded."""
    episode: Episode = open_day("2024-06-14", POOL)
    answers = {episode.call("compute_alpha_factor", {"expression": "RSQR60", "period": p}) for p in ("5d", "250d")}
    assert len(answers) == 1 and "错误" not in next(iter(answers))
