"""Property-based: over 10,000 random calls (valid, invalid, hostile) on the real data, no exception
escapes, no tool hits an internal error, and the account stays consistent after every call:
cash >= 0, holdings >= 0, and value at the T0 close = value before - costs paid.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trade_data.store import MarketStore
from trade_tools.episode import Episode, Task
from trade_tools.indicators import INDICATORS
from trade_tools.rules import ExecutionRules
from trade_tools.sampler import day_task

CALLS_PER_EPISODE = 25
EPISODES = 420
DAYS = [
    "2018-03-15",
    "2019-08-26",
    "2020-02-04",
    "2020-08-24",
    "2021-07-28",
    "2022-10-31",
    "2023-08-28",
    "2024-02-05",
    "2024-06-14",
    "2024-10-08",
    "2025-04-07",
    "2025-09-11",
]
HOSTILE = [
    "$close*0+(lambda:1+1)()",
    "__import__('os').system('true')",
    "Ref($close,-1)",
    "Ref($close,1-2)",
    "9**9**9",
    "$vwap/$close",
    "$$roewa_q",
    "ChangeInstrument('SH000300',$close)",
    "",
    "x" * 400,
    "Mean($close,5)/$close",
    "ROC20",
    "kmid",
    "Corr($close,Log($volume+1),10)",
    "Rank($close,0)",
    "If($close>$open,1,-1)",
]


def values(pool: list[str]) -> st.SearchStrategy[object]:
    symbols = st.sampled_from([*pool, "SH600519", "SZ000001", "sh600000", "SH000300", "BJ830000", "", "SH60051"])
    amounts = st.one_of(
        st.integers(-500, 200_000), st.sampled_from([100, 200, 1000, 0]), st.floats(), st.text(max_size=4), st.none()
    )
    periods = st.one_of(
        st.sampled_from(["20d", "5d", "60", "250d", "0d", "251d", "-5d", "abc", "1d"]), st.integers(-5, 300)
    )
    names = st.lists(st.one_of(st.sampled_from(INDICATORS), st.text(max_size=6)), max_size=6)
    amounts = st.one_of(amounts, st.booleans())
    price = st.fixed_dictionaries(
        {"symbol": symbols}, optional={"period": periods, "indicators": names, "date": st.just("2030-01-01")}
    )
    macro = st.fixed_dictionaries(
        {}, optional={"index": st.sampled_from(["SH000300", "SH000905", "SH000001", "SH000016", 3]), "period": periods}
    )
    alpha = st.fixed_dictionaries(
        {
            "expression": st.one_of(st.sampled_from(HOSTILE), st.text(max_size=30)),
            "symbols": st.lists(symbols, max_size=5),
        },
        optional={"period": periods},
    )
    action = st.fixed_dictionaries(
        {"type": st.sampled_from(["buy", "buy", "sell", "sell", "stop", "hold"])},
        optional={"symbol": symbols, "amount": amounts, "reasoning": st.text(max_size=20)},
    )
    return st.one_of(
        st.tuples(st.just("get_price_data"), price),
        st.tuples(st.just("get_macro_indicators"), macro),
        st.tuples(st.just("compute_alpha_factor"), alpha),
        st.tuples(st.just("TakeAction"), action),
        st.tuples(st.sampled_from(["TakeAction", "get_price_data", "nope", ""]), st.text(max_size=40)),
    )


def check_account(day: Episode) -> None:
    assert day.cash >= -1e-6
    for position in day.positions.values():
        assert 0 <= position.sellable <= position.shares and position.shares > 0
    assert day.value() == pytest.approx(day.value_before - day.costs_paid(), rel=1e-9, abs=1e-6)
    assert day.internal_errors == 0


@pytest.mark.slow
def test_ten_thousand_random_calls_keep_the_account_consistent(sample_store: MarketStore) -> None:
    tasks = [day_task(sample_store, d, pool_size=8, seed=i) for i, d in enumerate(DAYS)]
    made = {"calls": 0}

    @settings(max_examples=EPISODES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(data=st.data(), which=st.integers(0, len(tasks) - 1))
    def one_episode(data: st.DataObject, which: int) -> None:
        task = tasks[which]
        day = Episode.start(task, sample_store)
        for _ in range(CALLS_PER_EPISODE):
            name, arguments = data.draw(values(task.pool))
            payload = arguments if isinstance(arguments, str) else json.dumps(arguments)
            text = day.call(name, payload)
            made["calls"] += 1
            assert isinstance(text, str) and text
            check_account(day)
        assert day.tool_calls == CALLS_PER_EPISODE

    one_episode()
    assert made["calls"] >= 10_000


RATES = st.floats(0, 0.01)
RULES = st.builds(
    ExecutionRules,
    lot_size=st.sampled_from([1, 2, 10, 100]),
    star_min_shares=st.integers(1, 30),
    commission_rate=RATES,
    min_commission=st.one_of(st.just(5.0), st.floats(0, 50)),
    stamp_duty=st.tuples(st.tuples(st.just(dt.date(1990, 1, 1)), RATES)),
    transfer_fee_rate=RATES,
    slippage=st.floats(0, 0.09),
    max_position_weight=st.one_of(st.none(), st.floats(0.01, 1)),
)
TINY = ["SH601018", "SH600519", "SH688981", "SZ300750"]  # 3 to 1,555 CNY a share on 2024-06-14


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    rules=RULES,
    holdings=st.lists(st.integers(1, 10), min_size=len(TINY), max_size=len(TINY)),
    cash=st.floats(0, 5),
    orders=st.lists(
        st.tuples(st.sampled_from(["buy", "sell"]), st.sampled_from(TINY), st.integers(1, 10)), min_size=1, max_size=8
    ),
)
@example(rules=ExecutionRules(), holdings=[1] * len(TINY), cash=0.0, orders=[("sell", "SH601018", 1)])
def test_cash_never_goes_negative_under_random_rules_and_tiny_holdings(
    sample_store: MarketStore,
    rules: ExecutionRules,
    holdings: list[int],
    cash: float,
    orders: list[tuple[str, str, int]],
) -> None:
    task = Task(
        task_id="tiny", date="2024-06-14", pool=TINY, holdings=dict(zip(TINY, holdings, strict=True)), cash=cash
    )
    day = Episode.start(task, sample_store, rules=rules)
    for side, symbol, amount in orders:
        day.call("TakeAction", {"type": side, "symbol": symbol, "amount": amount})
        assert day.cash >= 0 and day.internal_errors == 0
        assert all(0 <= p.sellable <= p.shares for p in day.positions.values())
