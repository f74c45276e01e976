"""Forward returns, r_outcome and the built-in schemes against hand calculations on the real data."""

from __future__ import annotations

import pandas as pd
import pytest

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_reward.outcome import Outcome, outcome
from trade_reward.schemes import get_scheme
from trade_tools.episode import Episode, Task

WEIGHTS = (0.5, 0.3, 0.2)


def _row(table: pd.DataFrame, symbol: str, day: str) -> pd.Series:
    return table[(table["symbol"] == symbol) & (table["date"] == day)].iloc[0]


def _start(store: MarketStore, day: str, pool: list[str], holdings: dict[str, int], cash: float, **kw) -> Episode:  # type: ignore[no-untyped-def]
    return Episode.start(Task(task_id="t", date=day, pool=pool, holdings=holdings, cash=cash), store, **kw)


@pytest.mark.real_data
def test_growth_across_an_ex_dividend_day_uses_adjusted_prices(sample_store: MarketStore, sample_table) -> None:  # type: ignore[no-untyped-def]
    truth = ground_truth(sample_store, "2025-10-14", ["SZ000001"])  # SZ000001 goes ex-dividend on 2025-10-15
    assert [d.isoformat() for d in truth.horizon_dates] == ["2025-10-15", "2025-10-16", "2025-10-17"]
    t0 = _row(sample_table, "SZ000001", "2025-10-14")
    assert truth.close["SZ000001"] == 11.57
    for k, day in enumerate(["2025-10-15", "2025-10-16", "2025-10-17"]):
        row = _row(sample_table, "SZ000001", day)
        assert truth.growth["SZ000001"][k] == pytest.approx(row.close * row.factor / (t0.close * t0.factor), rel=1e-6)
    raw_drop = 11.40 / 11.57 - 1  # -1.47% in raw prices: the dividend, not a loss
    assert truth.growth["SZ000001"][0] - 1 == pytest.approx(11.40 * 145.379771 / (11.57 * 142.363980) - 1, rel=1e-5)
    assert truth.growth["SZ000001"][0] - 1 > raw_drop + 0.02


@pytest.mark.real_data
def test_suspended_days_keep_the_last_close(sample_store: MarketStore) -> None:
    truth = ground_truth(sample_store, "2024-07-18", ["SH600027", "SH600519"])  # SH600027 suspended 07-19 .. 08-01
    assert truth.close["SH600027"] == 6.08 and truth.growth["SH600027"] == [1.0, 1.0, 1.0]
    with pytest.raises(TradeError, match="has no T\\+3"):
        ground_truth(sample_store, "2025-12-29", ["SH600519"])


@pytest.mark.real_data
def test_r_outcome_by_hand(sample_store: MarketStore, sample_table) -> None:  # type: ignore[no-untyped-def]
    day = _start(sample_store, "2025-10-14", ["SZ000001", "SH600519"], {"SZ000001": 10_000}, 500_000.0)
    day.call("TakeAction", {"type": "sell", "symbol": "SZ000001", "amount": 6000})
    day.call("TakeAction", {"type": "buy", "symbol": "SH600519", "amount": 100})
    day.call("TakeAction", {"type": "stop", "reasoning": "rotate"})
    truth = ground_truth(sample_store, "2025-10-14", ["SZ000001", "SH600519"])
    base = 500_000 + 10_000 * 11.57
    maotai_t0 = _row(sample_table, "SH600519", "2025-10-14")

    def value(cash: float, pingan: int, maotai: int, day_: str) -> float:
        p = _row(sample_table, "SZ000001", day_)
        m = _row(sample_table, "SH600519", day_)
        pingan_t0 = _row(sample_table, "SZ000001", "2025-10-14")
        return (
            cash
            + pingan * 11.57 * p.close * p.factor / (pingan_t0.close * pingan_t0.factor)
            + maotai * maotai_t0.close * m.close * m.factor / (maotai_t0.close * maotai_t0.factor)
        )

    days = ["2025-10-15", "2025-10-16", "2025-10-17"]
    r_orig = sum(w * (value(500_000, 10_000, 0, d) / base - 1) for w, d in zip(WEIGHTS, days, strict=True))
    r_new = sum(w * (value(day.cash, 4000, 100, d) / base - 1) for w, d in zip(WEIGHTS, days, strict=True))
    result = outcome(day, truth)
    # the dataset stores adjusted prices as float32 (Qlib's format): returns agree to ~1e-7
    assert result.r_orig == pytest.approx(r_orig, abs=2e-7) and result.r_new == pytest.approx(r_new, abs=2e-7)
    assert result.r_outcome == pytest.approx(r_new - r_orig, abs=2e-7)
    for k, d in enumerate(days):  # the per-horizon path a drawdown-style scheme can use
        assert result.path_new[k] == pytest.approx(value(day.cash, 4000, 100, d) / base - 1, abs=2e-7)
        assert result.path_orig[k] == pytest.approx(value(500_000, 10_000, 0, d) / base - 1, abs=2e-7)
    fees = day.costs_paid()
    assert fees > 0 and day.cash < 500_000 + 6000 * 11.57 - 100 * maotai_t0.close  # fees were paid out of cash


def test_doing_nothing_scores_exactly_zero(sample_store: MarketStore) -> None:
    day = _start(sample_store, "2024-06-14", ["SZ000001", "SH600519"], {"SZ000001": 1000}, 100_000.0)
    day.call("get_price_data", {"symbol": "SH600519"})
    day.call("TakeAction", {"type": "stop", "reasoning": "hold"})
    result = outcome(day, ground_truth(sample_store, "2024-06-14", ["SZ000001", "SH600519"]))
    assert result.r_outcome == 0.0 and result.stopped and result.valid_calls == 2
    reward = get_scheme("bucketed").score(result)
    assert (reward.score, reward.bucket, reward.failure) == (0.0, 0, None)


@pytest.mark.parametrize(
    ("r", "bucket"),
    [
        (-0.05, -2),
        (-0.02, -2),
        (-0.0199, -1),
        (-0.005, -1),
        (-0.0049, 0),
        (0.0, 0),
        (0.0049, 0),
        (0.005, 1),
        (0.0199, 1),
        (0.02, 2),
        (0.3, 2),
    ],
)
def test_bucket_edges(r: float, bucket: int) -> None:
    result = Outcome(r_new=r, r_orig=0.0, r_outcome=r, status="stopped", valid_calls=3, stopped=True)
    assert get_scheme("bucketed").score(result).score == bucket
    continuous = get_scheme("continuous").score(result).score
    assert continuous == pytest.approx(max(-1.0, min(1.0, 50 * r)))


@pytest.mark.parametrize(
    ("status", "valid", "failure"),
    [("open", 3, "no_stop"), ("truncated", 3, "truncated"), ("stopped", 0, "no_valid_call"), ("failed", 1, "no_stop")],
)
def test_failures_score_below_every_bucket(status: str, valid: int, failure: str) -> None:
    result = Outcome(
        r_new=0.1, r_orig=0.0, r_outcome=0.1, status=status, valid_calls=valid, stopped=status == "stopped"
    )
    bucketed, continuous = get_scheme("bucketed").score(result), get_scheme("continuous").score(result)
    assert (bucketed.score, bucketed.failure, bucketed.bucket) == (-3.0, failure, None)
    assert (continuous.score, continuous.failure) == (-1.5, failure)


def test_schemes_are_configurable_and_unknown_names_list_the_valid_ones() -> None:
    result = Outcome(r_new=0.01, r_orig=0.0, r_outcome=0.01, status="stopped", valid_calls=1, stopped=True)
    assert get_scheme("bucketed", edges=(-0.1, -0.05, 0.005, 0.009)).score(result).score == 2
    assert get_scheme("continuous", scale=10, clip=0.5).score(result).score == pytest.approx(0.1)
    with pytest.raises(TradeError, match="valid: bucketed, continuous"):
        get_scheme("sharpe")
    with pytest.raises(TradeError, match="bad settings for reward scheme 'bucketed'"):
        get_scheme("bucketed", edges=(0.02, 0.01, 0.0, -0.01))
    with pytest.raises(TradeError, match="bad settings"):
        get_scheme("continuous", temperature=1)
