"""Confidence intervals of `trade eval tasks`: stationary bootstrap over T0 days, each drawn with all its tasks and
samples."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np

from trade_eval.single_day import summarize, summary_lines
from trade_eval.uncertainty import Bootstrap, Clusters
from trade_records.runfolder import EpisodeRecord
from trade_tools.grading import Reward


def _episode(
    task: int, sample: int, score: float, *, day: int = 0, stopped: bool = True, errors: int = 0, played: bool = True
) -> EpisodeRecord:
    reward = Reward(score=score, scheme="bucketed", r_new=score, r_orig=score, r_outcome=score)
    return EpisodeRecord(
        task_id=f"t{task}",
        sample=sample,
        date=dt.date(2025, 7, 1) + dt.timedelta(day),
        status="done" if played else "failed",
        episode_status="stopped" if stopped else "truncated",
        rewards={"bucketed": reward} if played else {},
        tool_calls=4,
        tool_errors=errors,
        turns=2,
        trajectory_id=f"t{task}-{sample}",
    )


def _run(samples: int, per_day: int = 1) -> list[EpisodeRecord]:
    """Twelve T0 days of ``per_day`` tasks; every task of a day, and every sample of a task, scores the same (as
    tasks that share a market can): the day is the unit of information."""
    pick = random.Random(5)
    scores = [pick.uniform(-1, 1) for _ in range(12)]
    return [
        _episode(day * per_day + k, n, scores[day], day=day, stopped=day % 3 > 0, errors=(day + k) % 4)
        for day in range(12)
        for k in range(per_day)
        for n in range(samples)
    ]


def test_every_mean_carries_a_seeded_interval_that_contains_it() -> None:
    records = _run(samples=2, per_day=2)
    summary = summarize(records, ["bucketed"])
    for key, value in [
        ("stop_rate", summary.stop_rate),
        ("tool_error_rate", summary.tool_error_rate),
        ("mean_reward", summary.mean_reward["bucketed"]),
    ]:
        interval = getattr(summary, f"{key}_ci")
        interval = interval["bucketed"] if key == "mean_reward" else interval
        assert interval[0] < value < interval[1], key
    shuffled = random.Random(1).sample(records, len(records))  # episodes finish in any order
    assert summarize(shuffled, ["bucketed"]) == summary
    assert summary.interval_method == Clusters([r.date for r in records], Bootstrap()).describe()
    assert "stationary bootstrap over T0 days (blocks of consecutive days, mean block 2 days;" in (
        summary.interval_method
    )
    lines = summary_lines(summary)
    low, high = summary.mean_reward_ci["bucketed"]
    assert f"mean reward bucketed: {summary.mean_reward['bucketed']:+.4f} [{low:+.4f}, {high:+.4f}]" in lines
    assert f"intervals: {summary.interval_method}" in lines


def test_the_tasks_and_samples_of_a_day_are_resampled_together() -> None:
    """Four tasks a day, two samples each, all scoring as their day does, carry one day's information:
    resampled by task (as independent tasks) the interval would be about half as wide (sqrt 4) as it is."""
    records = _run(samples=2, per_day=4)
    low, high = summarize(records, ["bucketed"]).mean_reward_ci["bucketed"]
    scores = [r.rewards["bucketed"].score for r in records]
    by_task = Clusters([r.task_id for r in records], Bootstrap(method="iid")).mean(scores)
    assert high - low > 1.6 * (by_task[1] - by_task[0])
    once = summarize(_run(samples=1), ["bucketed"]).mean_reward_ci["bucketed"]
    assert np.allclose([low, high], once)  # the same information: one task a day, one sample


def test_no_interval_from_fewer_than_two_played_days() -> None:
    for records in ([], [_episode(0, 0, 0.5), _episode(1, 0, 0.0, day=1, played=False)], _run(2, 3)[:6]):
        summary = summarize(records, ["bucketed"])
        assert summary.mean_reward_ci == {"bucketed": None} and summary.stop_rate_ci is None
        lines = summary_lines(summary)
        assert any(line.startswith("mean reward bucketed: ") and line.endswith(" [-]") for line in lines)
