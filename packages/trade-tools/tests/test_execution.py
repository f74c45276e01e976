"""A-share execution at the T0 close, including every defect found in the reference implementation."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from trade_data.store import MarketStore
from trade_data.symbols import PRICE_LIMITS, Board
from trade_tools.portfolio import MAX_CASH, MAX_SHARES
from trade_tools.rules import ExecutionRules


def act(episode, **args) -> str:  # type: ignore[no-untyped-def]
    return episode.call("TakeAction", json.dumps(args))


def state(episode) -> str:  # type: ignore[no-untyped-def]
    return json.dumps([episode.cash, {k: v.model_dump() for k, v in episode.positions.items()}])


@pytest.mark.real_data
def test_buy_fills_at_the_close_with_fees_by_hand(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SH600519", "SZ000001"])
    text = act(day, type="buy", symbol="SH600519", amount=100, reasoning="r")
    assert text.startswith("成交：买入SH600519 100股")
    price = 1555.00 * 1.0005
    gross = round(100 * price, 2)
    fees = round(gross * 0.00025, 2) + round(gross * 0.00001, 2)
    assert day.cash == pytest.approx(1_000_000 - gross - fees)
    assert day.positions["SH600519"].shares == 100 and day.positions["SH600519"].sellable == 0
    assert day.value() == pytest.approx(day.value_before - day.costs_paid())


def test_minimum_commission_and_stamp_duty_by_date(open_day) -> None:  # type: ignore[no-untyped-def]
    for date, duty in (("2023-08-25", 0.001), ("2023-08-28", 0.0005)):
        day = open_day(date, ["SZ000001"], holdings={"SZ000001": 1000})
        close = day.view.last_close("SZ000001")
        act(day, type="sell", symbol="SZ000001", amount=100)
        fill = day.actions[-1].fill
        gross = round(100 * close * 0.9995, 2)
        assert fill.commission == 5.0  # 0.025% of ~1,100 CNY is below the 5 CNY minimum
        assert fill.stamp_duty == round(gross * duty, 2)
        assert day.cash == pytest.approx(1_000_000 + gross - 5.0 - fill.stamp_duty - round(gross * 0.00001, 2))


def test_negative_and_zero_amounts_are_refused_and_change_nothing(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SH600519", "SZ000001"], holdings={"SZ000001": 1000})
    before = state(day)
    for side, amount in (("buy", -100), ("sell", -100), ("buy", 0), ("sell", 0)):
        assert "数量必须是正整数" in act(day, type=side, symbol="SZ000001", amount=amount)
    for bad in ("100.5", "true", '"abc"', "[100]"):
        text = day.call("TakeAction", f'{{"type": "buy", "symbol": "SZ000001", "amount": {bad}}}')
        assert text.startswith("错误：参数 amount 无效")
    assert state(day) == before
    assert [a.accepted for a in day.actions] == [False] * 4 and all(a.reason for a in day.actions)


def test_nothing_executes_after_stop(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SH600519"])
    act(day, type="stop", reasoning="done")
    before = state(day)
    text = act(day, type="buy", symbol="SH600519", amount=100)
    assert text.startswith("错误：本交易日已结束（已停止）")
    assert day.call("get_price_data", '{"symbol": "SH600519"}').startswith("错误：本交易日已结束")
    assert state(day) == before and day.status == "stopped" and len(day.actions) == 1


@pytest.mark.real_data
def test_position_cap_is_enforced_not_a_hint(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SH600519"])
    assert "超过组合总值40%上限" in act(day, type="buy", symbol="SH600519", amount=300)  # ~466,500 CNY
    assert act(day, type="buy", symbol="SH600519", amount=200).startswith("成交")
    assert "超过组合总值40%上限" in act(day, type="buy", symbol="SH600519", amount=100)
    unlimited = open_day("2024-06-14", ["SH600519"], rules=ExecutionRules(max_position_weight=None))
    assert act(unlimited, type="buy", symbol="SH600519", amount=300).startswith("成交")


def test_close_at_limit_up_cannot_be_bought_nor_limit_down_sold(open_day, find_day, sample_store: MarketStore) -> None:  # type: ignore[no-untyped-def]
    symbol, date = find_day(sample_store, Board.MAIN, sample_store.limit_up)
    day = open_day(date, [symbol])
    assert day.view.last_close(symbol) == pytest.approx(
        round(day.view.window(symbol, 2, adjusted=False).close[0] * 1.1, 2), abs=0.011
    )
    assert f"{symbol}收盘涨停，无法买入" in act(day, type="buy", symbol=symbol, amount=100)
    symbol, date = find_day(sample_store, Board.MAIN, sample_store.limit_down)
    day = open_day(date, [symbol], holdings={symbol: 1000})
    assert f"{symbol}收盘跌停，无法卖出" in act(day, type="sell", symbol=symbol, amount=100)
    assert day.positions[symbol].shares == 1000


def test_limits_follow_the_board_and_date(open_day, find_day, sample_store: MarketStore) -> None:  # type: ignore[no-untyped-def]
    # ChiNext after 2020-08-24 up 12-18%: at limit under a flat 10% rule, tradable under the real 20% rule
    traded = sample_store.traded & ~sample_store.limit_up
    symbol, date = find_day(sample_store, Board.CHINEXT, traded, after="2020-09-01", change=(0.12, 0.18))
    assert act(open_day(date, [symbol]), type="buy", symbol=symbol, amount=100).startswith("成交")
    # the same board before the switch: +10% was its limit
    symbol, date = find_day(sample_store, Board.CHINEXT, sample_store.limit_up, after="2019-01-01")
    assert date.isoformat() < "2020-08-24"
    assert "收盘涨停" in act(open_day(date, [symbol]), type="buy", symbol=symbol, amount=100)
    symbol, date = find_day(sample_store, Board.STAR, sample_store.limit_up, after="2019-08-01")
    assert "收盘涨停" in act(open_day(date, [symbol]), type="buy", symbol=symbol, amount=200)


def test_price_limits_are_rules_data_for_fills_and_prompt(open_day, find_day, sample_store: MarketStore) -> None:  # type: ignore[no-untyped-def]
    """The store's flags, the fills and the prompt read one table; rules with another table change fills and prompt."""
    assert ExecutionRules().price_limits == PRICE_LIMITS  # the table the store's flags use
    narrow = tuple(limit._replace(fraction=0.05) if limit.board is Board.MAIN else limit for limit in PRICE_LIMITS)
    rules = ExecutionRules().model_copy(update={"price_limits": narrow})
    symbol, date = find_day(sample_store, Board.MAIN, sample_store.traded, change=(0.06, 0.09))
    assert act(open_day(date, [symbol]), type="buy", symbol=symbol, amount=100).startswith("成交")
    refused = act(open_day(date, [symbol], rules=rules), type="buy", symbol=symbol, amount=100)
    assert f"{symbol}收盘涨停，无法买入" in refused
    symbol, date = find_day(sample_store, Board.MAIN, sample_store.traded, change=(-0.09, -0.06))
    held = {symbol: 1000}
    assert act(open_day(date, [symbol], holdings=held), type="sell", symbol=symbol, amount=100).startswith("成交")
    refused = act(open_day(date, [symbol], holdings=held, rules=rules), type="sell", symbol=symbol, amount=100)
    assert f"{symbol}收盘跌停，无法卖出" in refused
    day = dt.date(2024, 6, 14)
    assert "主板±10%，创业板(SZ300/301)±20%，科创板(SH688)±20%" in ExecutionRules().describe(day)
    assert "主板±5%，创业板(SZ300/301)±20%" in rules.describe(day)
    assert "创业板(SZ300/301)±10%" in ExecutionRules().describe(dt.date(2020, 8, 21))  # the regime on T0


def test_lots_star_board_and_odd_lot_sells(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SZ000001", "SH688981"], holdings={"SZ000001": 1050, "SH688981": 250})
    assert "100股的整数倍" in act(day, type="buy", symbol="SZ000001", amount=150)
    assert "零股须一次全部卖出" in act(day, type="sell", symbol="SZ000001", amount=150)
    assert act(day, type="sell", symbol="SZ000001", amount=1050).startswith("成交")  # odd lot sold whole
    assert "科创板每笔至少200股" in act(day, type="buy", symbol="SH688981", amount=150)
    assert act(day, type="buy", symbol="SH688981", amount=201).startswith("成交")  # then 1-share steps
    assert act(day, type="sell", symbol="SH688981", amount=250).startswith("成交")  # initial shares sell on T0
    assert day.positions["SH688981"].shares == 201


def test_t_plus_one_shares_bought_today_cannot_be_sold(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SZ000001"], holdings={"SZ000001": 200})
    assert act(day, type="buy", symbol="SZ000001", amount=300).startswith("成交")
    text = act(day, type="sell", symbol="SZ000001", amount=500)
    assert "可卖SZ000001仅200股（其中300股为今日买入，T+1不可卖）" in text
    assert act(day, type="sell", symbol="SZ000001", amount=200).startswith("成交")
    assert day.positions["SZ000001"].shares == 300 and day.positions["SZ000001"].sellable == 0


@pytest.mark.real_data
def test_suspended_cash_and_holding_checks(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-07-22", ["SH600027", "SH600519"], holdings={"SH600027": 1000}, cash=100_000)
    assert "今日停牌" in act(day, type="sell", symbol="SH600027", amount=100)
    assert "现金不足" in act(day, type="buy", symbol="SH600519", amount=100)
    assert "未持有SH600519" in act(day, type="sell", symbol="SH600519", amount=100)
    assert "不在股票池中" in act(day, type="buy", symbol="SZ000001", amount=100)
    assert day.value() == pytest.approx(day.value_before)  # suspended stock valued at its last close (6.08)
    assert day.value_before == pytest.approx(100_000 + 1000 * 6.08)


def test_refused_orders_are_counted_logged_and_capped(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SZ000001"], rules=ExecutionRules(max_actions=3))
    for _ in range(3):
        act(day, type="buy", symbol="SZ000001", amount=150)
    assert "今日买卖次数已达上限3笔" in act(day, type="buy", symbol="SZ000001", amount=100)
    assert len(day.actions) == 4 and not any(a.accepted for a in day.actions)
    assert all(a.reason for a in day.actions)


def test_prompt_says_orders_fill_at_the_close(open_day) -> None:  # type: ignore[no-untyped-def]
    system, user = (m["content"] for m in open_day("2024-06-14", ["SZ000001"]).messages())
    assert "以T0收盘价成交" in system and "开盘前" not in system.replace("不是开盘前", "")
    assert "以今日收盘价成交" in user
    rules = ExecutionRules(commission_rate=0.0003, max_actions=7)
    system = open_day("2024-06-14", ["SZ000001"], rules=rules).messages()[0]["content"]
    assert rules.describe(dt.date(2024, 6, 14)) in system and "佣金0.030%" in system and "最多提交7笔" in system


def test_factor_calls_leave_no_thread_or_process_behind(open_day) -> None:  # type: ignore[no-untyped-def]
    """The reference ran Qlib queries in threads that kept running after a timeout; ours runs none."""
    import multiprocessing
    import threading

    day = open_day("2024-06-14", ["SH600519", "SZ000001"])
    threads = threading.active_count()
    for expression in ("RSQR60", "Corr($close, Log($volume+1), 60)", "Mean(Std($close,250),250)"):
        day.call("compute_alpha_factor", {"expression": expression, "symbols": ["SH600519", "SZ000001"]})
    assert threading.active_count() == threads and multiprocessing.active_children() == []
    assert day.internal_errors == 0


@pytest.mark.real_data
def test_a_sale_whose_fees_exceed_its_proceeds_and_the_cash_is_refused(open_day) -> None:  # type: ignore[no-untyped-def]
    """1 share at 4.91 CNY pays the 5 CNY minimum commission: with no cash, the account would end at -0.09."""
    day = open_day("2018-06-07", ["SH601018"], holdings={"SH601018": 1}, cash=0)
    text = act(day, type="sell", symbol="SH601018", amount=1)
    assert text.startswith("订单被拒绝：卖出所得4.91元不够支付费用5.00元（佣金最低5元），现金0.00元也不足以补足")
    assert day.cash == 0 and day.positions["SH601018"].shares == 1 and not day.actions[-1].accepted
    covered = open_day("2018-06-07", ["SH601018"], holdings={"SH601018": 1}, cash=0.09)
    assert act(covered, type="sell", symbol="SH601018", amount=1).startswith("成交")
    assert 0 <= covered.cash < 1e-9 and covered.positions == {}


def test_an_order_beyond_any_share_count_is_refused(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", ["SH600519"])
    for amount in (10**12 + 100, 10**309, -(10**5000)):
        text = day.call("TakeAction", {"type": "buy", "symbol": "SH600519", "amount": amount})
        assert text.startswith("订单被拒绝：数量必须是正整数（最多1,000,000,000,000股）") and len(text) < 200
    assert day.internal_errors == 0 and day.cash == 1_000_000


def test_no_fill_takes_the_portfolio_past_its_bounds(open_day) -> None:  # type: ignore[no-untyped-def]
    """Every state a day reaches reads back (``trade_tools.portfolio``): a sale that would take the cash over
    MAX_CASH and a buy that would hold more than MAX_SHARES of a stock are refused like any other order."""
    rich = open_day("2024-06-14", ["SH600519"], holdings={"SH600519": 100}, cash=MAX_CASH - 1000)
    text = act(rich, type="sell", symbol="SH600519", amount=100)
    assert text.startswith("订单被拒绝：卖出后现金将超过1,000,000,000,000元的上限")
    assert rich.positions["SH600519"].shares == 100 and rich.cash == MAX_CASH - 1000
    uncapped = ExecutionRules(max_position_weight=None)
    full = open_day("2024-06-14", ["SZ000001"], holdings={"SZ000001": MAX_SHARES - 100}, cash=1e6, rules=uncapped)
    assert act(full, type="buy", symbol="SZ000001", amount=100).startswith("成交")
    text = act(full, type="buy", symbol="SZ000001", amount=100)
    assert text.startswith(f"订单被拒绝：买入后持有SZ000001将超过{MAX_SHARES:,}股的持仓上限")
    assert full.positions["SZ000001"].shares == MAX_SHARES
    assert type(full).model_validate_json(full.model_dump_json()).positions == full.positions
