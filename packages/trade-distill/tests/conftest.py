"""Trajectories made by the real `trade eval` runs on the real data, for trade-distill's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from trade_core.cli import build_cli
from trade_core.hookspecs import hookimpl
from trade_core.plugins import get_manager
from trade_core.testing import inline_plugin, run_trade
from trade_eval.policies.baselines import Momentum
from trade_reward.taskbuilder import build_tasks


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures (a conftest below the rootdir cannot name them in ``pytest_plugins``)."""
    config.pluginmanager.import_plugin("trade_data.testing")


class PromptedMomentum(Momentum):
    """The momentum baseline's days with the Episode's prompt rendered, as a model's days have it (a baseline
    skips it): real days with tool calls that can be exported for training."""

    name = "momentum-prompted"
    reads_prompt = True


class PromptedPolicies:
    @hookimpl
    def trade_register_policies(self, register) -> None:  # type: ignore[no-untyped-def]
        register(PromptedMomentum())


@pytest.fixture(scope="session")
def backtest_run(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A momentum backtest of 6 days from 2025-06-20 (trajectories with ground truth, no reward: 2 lose)."""
    out = tmp_path_factory.mktemp("backtest") / "run"
    done = run_trade(
        "eval",
        "backtest",
        "--policy",
        "momentum",
        "--start-date",
        "2025-06-20",
        "--num-days",
        "6",
        "--data",
        str(sample_dataset),
        "--out",
        str(out),
    )
    assert done.code == 0, done.err
    return out


@pytest.fixture(scope="session")
def tasks_run(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """equal-weight over two tasks a day for the first days of July 2025 (scored: reward and ground truth)."""
    tasks = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(sample_dataset, tasks, split="test=2025-07-01:2025-07-08", pool_size="8", per_day=2, seed=3)
    out = tmp_path_factory.mktemp("tasks-run") / "run"
    done = run_trade(
        "eval",
        "tasks",
        "--tasks",
        str(tasks / "test.jsonl"),
        "--policy",
        "equal-weight",
        "--data",
        str(sample_dataset),
        "--out",
        str(out),
    )
    assert done.code == 0, done.err
    return out


@pytest.fixture(scope="session")
def prompted_run(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The momentum backtest of :func:`backtest_run` with each day's prompt: 6 days with tool calls, 2 losing."""
    out = tmp_path_factory.mktemp("prompted") / "run"
    args = [
        "eval",
        "backtest",
        "--policy",
        PromptedMomentum.name,
        "--start-date",
        "2025-06-20",
        "--num-days",
        "6",
        "--data",
        str(sample_dataset),
        "--out",
        str(out),
    ]
    with inline_plugin(get_manager(), PromptedPolicies(), "prompted-policies"):
        done = CliRunner().invoke(build_cli(get_manager()), args)
    assert done.exit_code == 0, done.output
    return out
