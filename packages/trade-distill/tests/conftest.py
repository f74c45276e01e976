"""Trajectories made by the real `trade eval` runs on the real data, for trade-distill's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_reward.tasks import build_tasks


@pytest.fixture(scope="session")
def backtest_run(real_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A momentum backtest of 3 days from 2025-06-20 (trajectories without reward or ground truth)."""
    out = tmp_path_factory.mktemp("backtest") / "run"
    done = run_trade("eval", "backtest", "--policy", "momentum", "--start-date", "2025-06-20", "--num-days", "3",
                     "--data", str(real_dataset), "--out", str(out))  # fmt: skip
    assert done.code == 0, done.err
    return out


@pytest.fixture(scope="session")
def tasks_run(real_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """equal-weight over two tasks a day for the first days of July 2025 (scored: reward and ground truth)."""
    tasks = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(real_dataset, tasks, split="test=2025-07-01:2025-07-08", pool_size="8", per_day=2, seed=3)
    out = tmp_path_factory.mktemp("tasks-run") / "run"
    done = run_trade("eval", "tasks", "--tasks", str(tasks / "test.jsonl"), "--policy", "equal-weight",
                     "--data", str(real_dataset), "--out", str(out))  # fmt: skip
    assert done.code == 0, done.err
    return out
