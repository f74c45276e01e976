"""Metrics against numbers worked out by hand, and the ``qlib`` convention against pyqlib itself."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trade_eval.metrics import Conventions, activity, drawdown, performance

DATES = ["2025-01-02", "2025-01-03", "2025-01-06", "2025-01-07"]
NAV = [100.0, 110.0, 99.0, 108.9]  # +10%, -10%, +10%


def test_standard_metrics_by_hand() -> None:
    row = performance(NAV, DATES, Conventions())
    std = math.sqrt(((0.1 - 0.1 / 3) ** 2 * 2 + (-0.1 - 0.1 / 3) ** 2) / 2)  # 0.11547
    assert row["total_return"] == pytest.approx(0.089)
    assert row["annualised_return"] == pytest.approx(1.089**84 - 1)  # 252 / 3 days
    assert row["volatility"] == pytest.approx(std * math.sqrt(252))
    assert row["sharpe"] == pytest.approx(0.1 / 3 / std * math.sqrt(252))
    assert (row["max_drawdown"], row["drawdown_peak"], row["drawdown_trough"]) == (
        pytest.approx(-0.1),
        "2025-01-03",
        "2025-01-06",
    )
    assert row["calmar"] == pytest.approx((1.089**84 - 1) / 0.1)
    assert (row["days"], row["final_nav"]) == (3, 108.9)


def test_risk_free_rate_and_trading_days_are_settings() -> None:
    row = performance(NAV, DATES, Conventions(trading_days=250, risk_free=0.0252))
    daily = 1.0252 ** (1 / 250) - 1
    r = np.array([0.1, -0.1, 0.1])
    assert row["sharpe"] == pytest.approx((r.mean() - daily) / r.std(ddof=1) * math.sqrt(250))
    assert row["annualised_return"] == pytest.approx(1.089 ** (250 / 3) - 1)


def test_qlib_convention_sums_returns() -> None:
    row = performance(NAV, DATES, Conventions("qlib"))
    assert row["annualised_return"] == pytest.approx(0.1 / 3 * 238)
    assert row["max_drawdown"] == pytest.approx(-0.1)  # cumsum 0.1, 0.0, 0.1
    assert (row["drawdown_peak"], row["drawdown_trough"]) == ("2025-01-03", "2025-01-06")
    assert row["total_return"] == pytest.approx(0.089)  # the NAV's own change, whatever the convention


def test_benchmarks_give_excess_return_information_ratio_and_win_rate() -> None:
    index = [100.0, 105.0, 105.0, 94.5]  # +5%, 0%, -10%
    row = performance(NAV, DATES, Conventions(), {"vs_index": index, "vs_hold": [100.0] * 4})
    active = np.array([0.05, -0.1, 0.2])
    assert row["excess_return_vs_index"] == pytest.approx(0.089 - -0.055)
    assert row["information_ratio_vs_index"] == pytest.approx(active.mean() / active.std(ddof=1) * math.sqrt(252))
    assert row["win_rate_vs_hold"] == pytest.approx(2 / 3)
    assert row["excess_return_vs_hold"] == pytest.approx(0.089)


def test_undefined_numbers_are_none() -> None:
    flat = performance([100.0, 100.0, 100.0], DATES[:3], Conventions(), {"vs_hold": [100.0, 100.0, 100.0]})
    assert flat["sharpe"] is None and flat["calmar"] is None and flat["information_ratio_vs_hold"] is None
    assert flat["max_drawdown"] == 0 and flat["win_rate_vs_hold"] is None  # hold itself: no day to win or lose
    assert performance(NAV, DATES, Conventions(), {"vs_hold": list(NAV)})["win_rate_vs_hold"] is None
    one = performance([100.0, 101.0], DATES[:2], Conventions())
    assert one["volatility"] is None and one["sharpe"] is None


def test_drawdown_dates_in_both_modes() -> None:
    nav = [100.0, 90.0, 95.0, 120.0, 80.0]
    dates = [f"d{i}" for i in range(5)]
    assert drawdown(nav, dates) == (pytest.approx(80 / 120 - 1), "d3", "d4")
    # Qlib's curve starts at the first day's return, so the first day's loss is no drawdown there
    r = np.array(nav[1:]) / np.array(nav[:-1]) - 1
    curve = np.cumsum(r)
    assert drawdown(nav, dates, "sum") == (pytest.approx(curve[3] - curve[2]), "d3", "d4")


def test_activity_counts_costs_failures_and_usage() -> None:
    base = {
        "status": "done",
        "episode_status": "stopped",
        "reason": "",
        "turnover": 0.1,
        "fees": 10.0,
        "costs": 15.0,
        "orders": 3,
        "refused": 1,
        "dividends": 0.0,
        "tool_calls": 6,
        "tool_errors": 1,
        "prompt_tokens": 1000,
        "completion_tokens": 200,
    }
    days = [
        base,
        {
            **base,
            "status": "failed",
            "episode_status": "failed",
            "reason": "timeout",
            "turnover": 0.0,
            "fees": 0.0,
            "costs": 0.0,
        },
        {**base, "episode_status": "truncated", "reason": "超过16轮仍未停止"},
        {**base, "status": "failed", "episode_status": "failed", "reason": "timeout"},
    ]
    row = activity(days)
    assert row["turnover"] == pytest.approx(0.3 / 4) and row["fees"] == 30 and row["costs"] == 45
    assert (row["failed_days"], row["failure_reasons"], row["unstopped_days"]) == (2, {"timeout": 2}, 3)
    assert row["tool_calls_per_day"] == 6 and row["prompt_tokens_per_day"] == 1000 and row["orders"] == 12


@pytest.mark.qlib
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_qlib_convention_reproduces_qlib_risk_analysis(seed: int, backtest) -> None:
    evaluate = pytest.importorskip("qlib.contrib.evaluate")
    rng = np.random.default_rng(seed)
    if seed == 0:  # the real equal-weight NAV of the tutorial window
        from trade_eval.policies.baselines import EqualWeight
        from trade_eval.policy import RunSettings

        nav = [1e6, *(r.nav for r in backtest(60).simulate(EqualWeight(), RunSettings()))]
    else:
        nav = list(1e6 * np.cumprod(np.r_[1, 1 + rng.normal(0.0005, 0.02, 250)]))
    dates = [f"day{i}" for i in range(len(nav))]
    r = pd.Series(np.array(nav[1:]) / np.array(nav[:-1]) - 1)
    theirs = evaluate.risk_analysis(r, N=238, freq=None, mode="sum")["risk"]
    ours = performance(nav, dates, Conventions("qlib"))
    assert ours["mean"] == pytest.approx(theirs["mean"], rel=1e-12)
    assert ours["std"] == pytest.approx(theirs["std"], rel=1e-12)
    assert ours["annualised_return"] == pytest.approx(theirs["annualized_return"], rel=1e-12)
    assert ours["sharpe"] == pytest.approx(theirs["information_ratio"], rel=1e-9)
    assert ours["max_drawdown"] == pytest.approx(theirs["max_drawdown"], rel=1e-12)
