"""The baselines on the real data, checked against computations from the raw price arrays and the published
fee schedule, without the Episode or the point-in-time view."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from trade_data.columns import raw_prices
from trade_data.store import MarketStore
from trade_eval.backtest import Backtest
from trade_eval.policies.baselines import BASELINES, EqualWeight, Hold, Momentum, OracleSignal, Random, rebalance
from trade_eval.policy import Policy, RunSettings
from trade_records.runfolder import DayRecord
from trade_tools.episode import Episode
from trade_tools.records import Task
from trade_tools.trajectory import Trajectory


def played(backtest: Backtest, policy: Policy, seed: int = 0) -> list[tuple[DayRecord, Trajectory]]:
    """The days of ``policy``; the oracle reads KMID, as `--set signal=KMID` has it read on data without a planted
    signal (the other baselines ignore the option)."""

    async def collect() -> list[tuple[DayRecord, Trajectory]]:
        settings = RunSettings(seed=seed, options={"signal": "KMID"})
        return [pair async for pair in backtest.days(policy, settings)]

    return asyncio.run(collect())


def last_bar(store: MarketStore, symbol: str, t: int) -> tuple[float, float]:
    """(raw close, factor) of the symbol's last traded day up to calendar row ``t``, from the store's arrays."""
    j = store.symbols.index(symbol)
    row = int(np.flatnonzero(store.traded[: t + 1, j])[-1])
    return float(raw_prices(store.adjusted["close"][row, j], store.factor[row, j], True)), float(store.factor[row, j])


def fill_cash(side: str, shares: int, close: float) -> float:
    """Cash a fill moves, by the default schedule: 0.05% slippage, commission 0.025% (at least 5 CNY), transfer
    fee 0.001%, stamp duty 0.05% on sells (from 2023-08-28), each rounded to the cent."""
    gross = round(shares * close * (1.0005 if side == "buy" else 0.9995), 2)
    fees = round(max(5.0, gross * 0.00025), 2) + round(gross * 0.00001, 2)
    if side == "buy":
        return -(gross + fees)
    return gross - fees - round(gross * 0.0005, 2)


@pytest.mark.real_data
def test_hold_nav_is_cash_plus_shares_at_the_close_with_dividends_in_cash(backtest, sample_store: MarketStore) -> None:
    run = backtest(60)
    records = run.simulate(Hold(), RunSettings())
    t0 = sample_store.day_index(run.dates[0])
    shares = records[0].holdings
    assert len(shares) >= 15 and all(r.holdings == shares for r in records)  # bought on day 1, then held
    cash = 1_000_000 + sum(fill_cash("buy", n, last_bar(sample_store, s, t0)[0]) for s, n in shares.items())
    dividends = 0.0
    for k, record in enumerate(records):
        t = t0 + k
        if k:
            for symbol, n in shares.items():
                (close, factor), (_, before) = last_bar(sample_store, symbol, t), last_bar(sample_store, symbol, t - 1)
                dividends += round(n * close * (factor / before - 1), 2) if factor != before else 0.0
        value = sum(n * last_bar(sample_store, s, t)[0] for s, n in shares.items())
        assert record.nav == pytest.approx(cash + dividends + value, abs=1e-6), record.date
    assert dividends > 10_000  # the window has ex-dividend days: the check above covers them
    assert records[-1].nav == pytest.approx(1_187_368.60, abs=0.01)


def test_equal_weight_fills_match_the_fee_schedule_and_equal_the_weights(backtest, sample_store: MarketStore) -> None:
    run = backtest(20)
    days = played(run, EqualWeight())
    k = next(i for i, (_, t) in enumerate(days) if i and {a.type for a in t.episode.actions} == {"buy", "sell", "stop"})
    (before, _), (record, trajectory) = days[k - 1], days[k]
    t = sample_store.day_index(record.date)
    holdings, cash = dict(before.holdings), before.cash + record.dividends
    for action in trajectory.episode.actions[:-1]:
        assert action.accepted, action.reason
        close = last_bar(sample_store, action.symbol, t)[0]
        cash += fill_cash(action.type, action.amount, close)
        change = action.amount if action.type == "buy" else -action.amount
        holdings[action.symbol] = holdings.get(action.symbol, 0) + change
    assert record.cash == pytest.approx(cash, abs=1e-6)
    assert record.holdings == {s: n for s, n in holdings.items() if n}
    values = {s: n * last_bar(sample_store, s, t)[0] for s, n in record.holdings.items()}
    assert record.nav == pytest.approx(cash + sum(values.values()), abs=1e-6)
    target = record.value_before / len(trajectory.episode.task.pool)
    pool = trajectory.episode.task.pool
    off = [s for s in pool if abs(values.get(s, 0) - target) > 100 * last_bar(sample_store, s, t)[0]]
    assert len(off) <= 1, off  # only a stock whose minimum order costs more than its weight, or the last buy


def test_momentum_holds_the_top_five_by_twenty_day_adjusted_return(backtest, sample_store: MarketStore) -> None:
    run = backtest(30)
    for record, trajectory in played(run, Momentum()):
        t = sample_store.day_index(record.date)
        gains = {}
        for symbol in trajectory.episode.task.pool:
            j = sample_store.symbols.index(symbol)
            rows = np.flatnonzero(sample_store.traded[: t + 1, j])[-21:]
            close = sample_store.adjusted["close"][rows, j]
            gains[symbol] = close[-1] / close[0] - 1
        top = sorted(gains, key=lambda s: -gains[s])[:5]
        limited = {
            s
            for s in [*top, *record.holdings]
            if sample_store.limit_up[t, sample_store.symbols.index(s)]
            or sample_store.limit_down[t, sample_store.symbols.index(s)]
        }
        assert set(record.holdings) - limited == set(top) - limited, record.date


@pytest.mark.parametrize("policy", [cls() for cls in BASELINES], ids=lambda p: p.name)
def test_baselines_trade_within_the_rules_and_stop_every_day(policy: Policy, backtest) -> None:
    """The oracle reads its factor in a turn of its own first (on the real data with ``--set signal=KMID``)."""
    run = backtest(20)
    reads = int(isinstance(policy, OracleSignal))
    for record, trajectory in played(run, policy):
        assert (record.status, record.episode_status, record.refused, record.tool_errors) == ("done", "stopped", 0, 0)
        assert record.orders <= trajectory.episode.rules.max_actions and record.turns == 1 + reads
        roles = [*["assistant", "tool"] * reads, "assistant", *["tool"] * (record.tool_calls - reads)]
        assert [m.role for m in trajectory.messages] == roles


def test_random_is_seeded_by_the_seed_and_the_date(backtest, sample_store: MarketStore) -> None:
    first, again, other = (backtest(10).simulate(Random(), RunSettings(seed=s)) for s in (3, 3, 4))
    assert [r.holdings for r in first] == [r.holdings for r in again]
    assert [r.holdings for r in first] != [r.holdings for r in other]
    day = first[5].date
    pool = ["SH600519", "SZ000001", "SZ300750", "SH601318", "SH688981", "SZ002594"]
    mornings = [
        Task(task_id="t", date=day, pool=pool, cash=1e6),
        Task(task_id="t", date=day, pool=pool, holdings={"SH600519": 100}, cash=5e5),
    ]
    drawn = [Random().weights(Episode.start(task, sample_store), RunSettings(seed=3)) for task in mornings]
    assert drawn[0] == drawn[1]  # the draw depends on the seed and the date, not on the portfolio


def test_when_the_cash_runs_short_buys_fill_largest_deviation_first_and_the_last_is_cut(
    backtest, sample_store: MarketStore
) -> None:
    """The README's rule, on targets adding up to more than the morning's value (as 100% and fees do)."""
    run = backtest(1)
    t = sample_store.day_index(run.dates[0])
    cheap = [s for s in run.day_pool(0) if last_bar(sample_store, s, t)[0] < 100]  # a lot is under 1% of the value
    free = [s for s in cheap if not sample_store.limit_up[t, sample_store.symbols.index(s)]][:4]
    task = Task(task_id="short", date=run.dates[0], pool=free, cash=1_000_000.0, universe="csi300")
    episode = Episode.start(task, sample_store)
    weights = dict(zip(free, [0.30, 0.39, 0.37, 0.35], strict=True))  # 141% of the morning's value
    for name, arguments in rebalance(episode, weights, ""):
        episode.call(name, arguments)
    buys = [a for a in episode.actions if a.type == "buy"]
    assert [a.symbol for a in buys][:3] == [free[1], free[2], free[3]] and all(a.accepted for a in buys)
    lot = {s: 100 * last_bar(sample_store, s, t)[0] for s in free}
    for action in buys[:2]:
        assert abs(action.fill.gross - weights[action.symbol] * 1_000_000) < 1.01 * lot[action.symbol]
    assert buys[2].fill.gross < weights[free[3]] * 1_000_000 - 10 * lot[free[3]]  # cut to the cash left
    assert episode.cash < 1.001 * min(lot.values()) + 5  # not one more lot of any of them
