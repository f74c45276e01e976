"""``trade eval compare`` on two real `trade eval tasks` runs: paired by (task, sample), bootstrap over T0 days."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_eval.policy import POLICIES, RunSettings
from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks
from trade_records.runfolder import EPISODES
from trade_reward.schemes import get_scheme
from trade_reward.taskbuilder import build_tasks


@pytest.fixture(scope="module")
def runs(sample_dataset: Path, sample_store: MarketStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """momentum (all 6 tasks) and random (the first 4, two samples each) on tasks built by `trade data tasks`."""
    root = tmp_path_factory.mktemp("tasks-runs")
    build_tasks(sample_dataset, root / "tasks", split="test=2025-07-01:2025-07-07", pool_size="8", per_day=2, seed=3)
    records, split, _ = load_tasks(root / "tasks", "test")
    for name, samples, limit in (("momentum", 2, None), ("random", 2, 4)):
        evaluation = TasksEval(
            sample_store, records[:limit], [get_scheme("bucketed"), get_scheme("continuous")], samples
        )
        manifest = new_manifest(
            evaluation,
            name,
            RunSettings(),
            command=[],
            tasks=root / "tasks",
            split=split,
            servers=(),
            data=sample_store.path,
        )
        run_tasks(evaluation, POLICIES.get(name), RunSettings(), root / name, manifest, progress=False)
    return root


def _compare(*args: Path | str) -> dict:
    done = run_trade("eval", "compare", *map(str, args), "--json")
    assert done.code == 0, done.err
    return json.loads(done.out)


def test_pairs_the_episodes_both_runs_played(runs: Path) -> None:
    out = _compare(runs / "momentum", runs / "random")
    assert out["kind"] == "tasks" and out["common_tasks"] == 4 and out["common_episodes"] == 8
    assert out["common_days"] == 2
    assert list(out["metrics"]) == ["bucketed", "continuous"]
    episodes = [json.loads(line) for line in (runs / "random" / EPISODES).read_text().splitlines()]
    mean = sum(e["rewards"]["continuous"]["score"] for e in episodes) / len(episodes)
    assert out["metrics"]["continuous"]["b"] == pytest.approx(mean)
    assert out["method"].endswith(
        "95% percentile intervals, stationary bootstrap over T0 days (blocks of consecutive days, mean block 1 days; "
        "each day with all its tasks and samples), 2000 resamples, seed 0"
    )
    text = run_trade("eval", "compare", str(runs / "momentum"), str(runs / "random")).out.splitlines()
    assert text[0] == "A = momentum (momentum), B = random (random): 4 common tasks on 2 days, 8 episodes"
    assert len(text) == 4 and text[-1].startswith("method: A minus B of the mean reward")


def test_identical_runs_differ_by_nothing_and_a_clear_edge_beats(runs: Path, tmp_path: Path) -> None:
    same = _compare(runs / "random", runs / "random")
    assert all(m["difference"] == 0 and m["ci"] == [0, 0] for m in same["metrics"].values())
    assert all(v.startswith("no difference distinguishable from noise") for v in same["verdicts"])
    better = tmp_path / "better"
    shutil.copytree(runs / "random", better)
    episodes = [json.loads(line) for line in (better / EPISODES).read_text().splitlines()]
    for episode in episodes:
        episode["rewards"]["bucketed"]["score"] += 0.5
    (better / EPISODES).write_text("".join(json.dumps(e) + "\n" for e in episodes))
    out = _compare(runs / "random", better)
    assert out["verdicts"][0] == (
        "better (random) beats random (random) on mean reward (bucketed) (+0.5000, 95% CI [+0.5000, +0.5000], "
        "4 common tasks on 2 days, 8 episodes)"
    )
    assert out["verdicts"][1].startswith("no difference distinguishable from noise on mean reward (continuous)")


def test_a_backtest_and_a_tasks_run_are_one_line_error(runs: Path, sample_dataset: Path, tmp_path: Path) -> None:
    done = run_trade(
        "eval",
        "backtest",
        "--policy",
        "hold",
        "--start-date",
        "2025-07-01",
        "--num-days",
        "3",
        "--data",
        str(sample_dataset),
        "--out",
        str(tmp_path / "bt"),
    )
    assert done.code == 0, done.err
    done = run_trade("eval", "compare", str(tmp_path / "bt"), str(runs / "random"))
    assert done.code == 2 and len(done.err.splitlines()) == 1
    assert done.err.startswith(f"error: {tmp_path / 'bt'} is a backtest run and {runs / 'random'} a tasks run")
