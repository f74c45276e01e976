"""Confidence intervals of `trade eval tasks`: bootstrap over tasks, each drawn with all its samples."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np

from trade_eval.tasks_eval import INTERVALS, EpisodeRecord, summarize, summary_lines
from trade_tools.records import Reward


def _episode(task: int, sample: int, score: float, *, stopped: bool = True, errors: int = 0,
             played: bool = True) -> EpisodeRecord:  # fmt: skip
    reward = Reward(score=score, scheme="bucketed", r_new=score, r_orig=score, r_outcome=score)
    return EpisodeRecord(
        task_id=f"t{task}", sample=sample, date=dt.date(2025, 7, 1), status="done" if played else "failed",
        episode_status="stopped" if stopped else "truncated", rewards={"bucketed": reward} if played else {},
        tool_calls=4, tool_errors=errors, turns=2, trajectory_id=f"t{task}-{sample}",
    )  # fmt: skip


def _run(samples: int) -> list[EpisodeRecord]:
    """Twelve tasks; every sample of a task plays it the same way (the samples are not independent)."""
    pick = random.Random(5)
    scores = [pick.uniform(-1, 1) for _ in range(12)]
    return [
        _episode(task, n, scores[task], stopped=task % 3 > 0, errors=task % 4)
        for task in range(12)
        for n in range(samples)
    ]


def test_every_mean_carries_a_seeded_interval_that_contains_it() -> None:
    records = _run(samples=2)
    summary = summarize(records, ["bucketed"])
    for key, value in [
        ("stop_rate", summary["stop_rate"]),
        ("tool_error_rate", summary["tool_error_rate"]),
        ("mean_reward", summary["mean_reward"]["bucketed"]),
    ]:
        interval = summary[f"{key}_ci"]["bucketed"] if key == "mean_reward" else summary[f"{key}_ci"]
        assert interval[0] < value < interval[1], key
    shuffled = random.Random(1).sample(records, len(records))  # episodes finish in any order
    assert summarize(shuffled, ["bucketed"]) == summary
    assert summary["interval_method"].startswith("95% percentile intervals, bootstrap over independent")
    assert "tasks, each drawn with all its samples" in summary["interval_method"]
    lines = summary_lines(summary)
    low, high = summary["mean_reward_ci"]["bucketed"]
    assert f"mean reward bucketed: {summary['mean_reward']['bucketed']:+.4f} [{low:+.4f}, {high:+.4f}]" in lines
    assert f"intervals: {summary['interval_method']}" in lines


def test_samples_of_a_task_are_resampled_together() -> None:
    """Four identical samples a task carry one task's information: resampled as independent episodes the
    interval would be about half as wide (sqrt 4) as it is."""
    records = _run(samples=4)
    low, high = summarize(records, ["bucketed"])["mean_reward_ci"]["bucketed"]
    scores = np.array([r.rewards["bucketed"].score for r in records])
    naive = INTERVALS.interval(scores[INTERVALS.indices(len(scores))].mean(axis=1))
    assert high - low > 1.6 * (naive[1] - naive[0])
    once = summarize(_run(samples=1), ["bucketed"])["mean_reward_ci"]["bucketed"]
    assert abs((high - low) - (once[1] - once[0])) < 0.25 * (once[1] - once[0])  # the same information


def test_no_interval_from_fewer_than_two_played_episodes() -> None:
    for records in ([], [_episode(0, 0, 0.5), _episode(1, 0, 0.0, played=False)]):
        summary = summarize(records, ["bucketed"])
        assert summary["mean_reward_ci"] == {"bucketed": None} and summary["stop_rate_ci"] is None
        lines = summary_lines(summary)
        assert any(line.startswith("mean reward bucketed: ") and line.endswith(" [-]") for line in lines)
