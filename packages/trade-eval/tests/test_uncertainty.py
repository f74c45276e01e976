"""Bootstrap intervals, paired differences and attribution: hand-made series with known answers."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pytest

from trade_eval.metrics import Conventions, attribution, table_lines
from trade_eval.uncertainty import Bootstrap, Clusters, intervals, paired_difference
from trade_records.runfolder import BacktestSummary

CONV = Conventions()


def _nav(r: np.ndarray) -> list[float]:
    return list(1e6 * np.cumprod(np.concatenate([[1.0], 1 + r])))


def test_stationary_bootstrap_draws_seeded_blocks_of_consecutive_days() -> None:
    boot = Bootstrap(resamples=200, block=5)
    picks = boot.indices(60)
    assert picks.shape == (200, 60) and picks.min() >= 0 and picks.max() < 60
    assert np.array_equal(picks, Bootstrap(resamples=200, block=5).indices(60))
    assert not np.array_equal(picks, Bootstrap(resamples=200, block=5, seed=1).indices(60))
    consecutive = np.mean(np.diff(picks, axis=1) % 60 == 1)
    assert consecutive == pytest.approx(1 - 1 / 5, abs=0.02)  # a new block starts with probability 1/5
    iid = Bootstrap(method="iid", resamples=200).indices(60)
    assert np.mean(np.diff(iid, axis=1) % 60 == 1) < 0.05


@pytest.mark.parametrize("method", ["stationary", "iid"])
def test_the_interval_of_the_mean_covers_the_truth_in_most_repetitions(method: str) -> None:
    """AR(1) daily returns (phi 0.3) with a known mean: a 90% interval covers it in about 90% of 200 runs."""
    rng = np.random.default_rng(3)
    boot = Bootstrap(method=method, resamples=500, level=0.9)  # type: ignore[arg-type]
    truth, covered = 0.001, 0
    for _ in range(200):
        noise = rng.normal(0, 0.01, 250)
        r = np.empty(250)
        r[0] = noise[0]
        for t in range(1, 250):
            r[t] = 0.3 * r[t - 1] + noise[t]
        lo, hi = intervals(_nav(r + truth), CONV, {}, boot)["mean_ci"]
        covered += lo <= truth <= hi
    assert covered / 200 >= (0.8 if method == "stationary" else 0.7)  # iid ignores the autocorrelation: too narrow


def test_every_mean_of_a_row_gets_an_interval_and_a_series_against_itself_has_none_of_width() -> None:
    r = np.random.default_rng(0).normal(0.002, 0.01, 60)
    nav = _nav(r)
    ci = intervals(nav, CONV, {"vs_index": nav}, Bootstrap())
    assert set(ci) == {"mean_ci", "total_return_ci", "sharpe_ci", "excess_return_vs_index_ci"}
    assert ci["mean_ci"][0] < r.mean() < ci["mean_ci"][1]
    assert ci["total_return_ci"][0] < nav[-1] / nav[0] - 1 < ci["total_return_ci"][1]
    assert ci["excess_return_vs_index_ci"] == [0.0, 0.0]
    assert intervals(_nav(np.zeros(10)), CONV, {}, Bootstrap())["sharpe_ci"] is None  # no variation: no Sharpe


def test_a_paired_difference_sees_a_small_edge_that_unpaired_noise_would_hide() -> None:
    """B is A minus 0.1% a day: the difference is exact and its interval a point, although each run's own
    mean is far less certain."""
    a = np.random.default_rng(1).normal(0.001, 0.02, 60)
    result = paired_difference(a, a - 0.001, CONV, Bootstrap())
    assert result["mean"]["difference"] == pytest.approx(0.001)
    assert result["mean"]["ci"] == pytest.approx([0.001, 0.001])
    assert result["total_return"]["ci"][0] > 0 and result["sharpe"]["ci"][0] > 0
    same = paired_difference(a, a, CONV, Bootstrap())
    assert same["mean"] == {"a": a.mean(), "b": a.mean(), "difference": 0.0, "ci": [0.0, 0.0]}
    rewards = paired_difference(np.ones(8), np.zeros(8), CONV, Bootstrap(method="iid"), keys=("mean",))
    assert rewards == {"mean": {"a": 1.0, "b": 0.0, "difference": 1.0, "ci": [1.0, 1.0]}}


def test_beta_alpha_and_r2_from_constructed_series() -> None:
    """r = 0.0002 + 1.5 x market exactly: beta 1.5, alpha 0.0002 x 252; the R^2 on the pool is corr^2."""
    rng = np.random.default_rng(2)
    market = rng.normal(0.0005, 0.01, 60)
    pool = market + rng.normal(0, 0.005, 60)
    policy = 0.0002 + 1.5 * market
    row = attribution(_nav(policy), _nav(market), _nav(pool), CONV)
    assert row["beta"] == pytest.approx(1.5)
    assert row["alpha"] == pytest.approx(0.0002 * 252)
    assert row["r2_equal_weight"] == pytest.approx(np.corrcoef(policy, pool)[0, 1] ** 2)
    assert attribution(_nav(pool), _nav(market), _nav(pool), Conventions(trading_days=238))["r2_equal_weight"] == 1
    assert attribution(_nav(policy), _nav(np.zeros(60)), _nav(pool), CONV)["beta"] is None  # a flat index


def test_the_table_prints_each_interval_beside_its_value_and_the_method_below() -> None:
    conventions = {**CONV.to_json("base"), "ci": Bootstrap().describe(60)}
    rows = {"p": {"mean": 0.001, "mean_ci": [-0.0002, 0.0021], "beta": 1.2}}
    summary = BacktestSummary(conventions=conventions, rows=rows, nav={})
    lines = table_lines(summary)
    assert "+0.10% [-0.02%, +0.21%]" in next(line for line in lines if line.startswith("mean daily return"))
    assert lines[-1] == (
        "[lo, hi]: 95% percentile intervals, stationary bootstrap over days (blocks of consecutive days, mean block 4 "
        "days), 2000 resamples, seed 0"
    )


def _days(n: int) -> list[str]:
    """``n`` consecutive ISO dates across a month's end."""
    return [(dt.date(2025, 6, 20) + dt.timedelta(k)).isoformat() for k in range(n)]


def test_clusters_draw_a_day_with_all_its_observations_and_pair_a_difference() -> None:
    rng = np.random.default_rng(5)
    per_day = rng.normal(0, 1, 30)
    a, b = np.repeat(per_day, 4), np.zeros(120)  # four tasks of a day that all score the same
    days = [day for day in _days(30) for _ in range(4)]
    boot = Bootstrap(method="iid", resamples=2000)
    clustered = Clusters(days, boot).difference(a, b)
    assert clustered["difference"] == pytest.approx(per_day.mean()) and clustered["b"] == 0
    naive = paired_difference(a, b, CONV, boot, keys=("mean",))["mean"]["ci"]
    width = np.diff(clustered["ci"])[0] / np.diff(naive)[0]
    assert width == pytest.approx(2, rel=0.15)  # sqrt(4 tasks): they are not 4 independent draws
    single = Clusters(_days(30), boot).difference(per_day, np.zeros(30))["ci"]
    assert single == pytest.approx(paired_difference(per_day, np.zeros(30), CONV, boot, keys=("mean",))["mean"]["ci"])
    same = Clusters(days, Bootstrap()).difference(a, a)
    assert same["difference"] == 0 and same["ci"] == [0, 0]
    assert Clusters(days[:4], Bootstrap()).mean(a[:4]) is None  # one day: nothing to resample
    errors, calls = rng.integers(0, 3, 120), np.full(120, 4)
    low, high = Clusters(days, Bootstrap()).ratio(errors, calls)
    assert low < errors.sum() / calls.sum() < high


def test_consecutive_days_are_drawn_in_blocks_in_date_order() -> None:
    """Rewards that flip sign from one day to the next cancel within a block of consecutive days: the interval
    is narrower than drawing days one by one, however the observations arrive."""
    observations = [(day, 1.0 if k % 2 else -1.0) for k, day in enumerate(_days(60)) for _ in range(2)]
    random.Random(0).shuffle(observations)
    days, values = [day for day, _ in observations], [value for _, value in observations]
    blocks = Clusters(days, Bootstrap()).mean(values)
    one_by_one = Clusters(days, Bootstrap(method="iid")).mean(values)
    assert np.diff(blocks)[0] < 0.5 * np.diff(one_by_one)[0]
    assert Clusters(days, Bootstrap()).describe() == (
        "95% percentile intervals, stationary bootstrap over T0 days (blocks of consecutive days, mean block 4 days; "
        "each day with all its tasks and samples), 2000 resamples, seed 0"
    )
