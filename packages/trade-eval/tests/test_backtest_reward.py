"""A backtest day's trajectory carries its ground truth, so it is scored like a single-day task (the reward's r_new).

The check is independent of the reward's code: the one-day path of the day's final portfolio must be the NAV
change the backtest itself books at the next close (its next morning's value, dividends settled), over the
day's value before its trades.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest

from trade_data.store import MarketStore
from trade_eval.backtest import Backtest
from trade_eval.policies.baselines import Momentum
from trade_eval.policy import RunSettings
from trade_records.runfolder import DayRecord
from trade_reward.forward import HORIZON
from trade_reward.outcome import outcome
from trade_tools.trajectory import Trajectory


def played(backtest: Backtest) -> list[tuple[DayRecord, Trajectory]]:
    async def collect() -> list[tuple[DayRecord, Trajectory]]:
        return [pair async for pair in backtest.days(Momentum(), RunSettings())]

    return asyncio.run(collect())


def test_each_days_return_is_the_nav_change_at_the_next_close(backtest: Callable[..., Backtest]) -> None:
    days = played(backtest(6))
    returns = []
    for (record, trajectory), (after, _) in itertools.pairwise(days):
        truth, episode = trajectory.ground_truth, trajectory.episode
        assert truth is not None and truth.date == record.date
        assert set(truth.close) == {*episode.task.pool, *episode.task.holdings}
        scored = outcome(episode, truth)
        assert scored.path_new[0] == pytest.approx(after.value_before / record.value_before - 1, abs=1e-6)
        returns.append(scored.r_new)
    assert min(returns) < 0 < max(returns)  # the days of 2025-06-20 go both ways: a sign error would show


def test_the_last_days_of_the_data_have_no_ground_truth(
    backtest: Callable[..., Backtest], sample_store: MarketStore
) -> None:
    start = sample_store.calendar[-HORIZON - 2].date()
    days = played(backtest(HORIZON + 2, start=start))
    assert [trajectory.ground_truth is not None for _, trajectory in days] == [True, True] + [False] * HORIZON
