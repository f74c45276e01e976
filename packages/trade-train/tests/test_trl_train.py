"""`trade train --trainer trl-grpo`: the planned run folder, and a real 2-step GRPO run of the tiny model on CPU."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_tools.trajectory import read_trajectories
from trade_train.trl_grpo.run import GRPOSettings, RunConfig

HUB_MODEL = "Qwen/Qwen3-0.6B"  # a hub id: a dry run plans it without fetching anything


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_a_dry_run_writes_the_plan(device: str, tasks: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run = run_trade(
        "train",
        "--trainer",
        "trl-grpo",
        "--model",
        HUB_MODEL,
        "--tasks",
        str(tasks),
        "--device",
        device,
        "--run-dir",
        str(run_dir),
        "--reward",
        "continuous",
        "--dry-run",
        "--",
        "steps=3",
        "num_generations=2",
    )
    assert run.code == 0, run.err
    assert "trade_train.trl_grpo.run run.json" in run.out
    assert f"trl-grpo on {device}: 3 steps of 2 task(s) x 2" in run.out
    config = RunConfig.model_validate_json((run_dir / "run.json").read_text())
    assert config.grpo == GRPOSettings(steps=3, num_generations=2)
    assert (config.reward, config.device, config.tasks) == ("continuous", device, tasks.resolve())
    assert "trade_train.trl_grpo.run run.json" in (run_dir / "command.sh").read_text()


def test_wrong_settings_are_one_line_before_anything_is_written(tasks: Path, tmp_path: Path) -> None:
    base = [
        "train",
        "--trainer",
        "trl-grpo",
        "--model",
        HUB_MODEL,
        "--tasks",
        str(tasks),
        "--dry-run",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    for args, expected in [
        (["--device", "gpu", "--", "stepz=3"], "bad trl-grpo setting: stepz: Extra inputs are not permitted"),
        (["--device", "gpu", "--", "batch_size=6"], "batch_size=6 is not a multiple of num_generations=4"),
        (["--device", "gpu", "--", "steps"], "override 'steps' is not KEY=VALUE"),
        (["--device", "npu"], "trl-grpo trains on cpu or one gpu, not npu"),
    ]:
        run = run_trade(*base, *args)
        assert run.code == 2 and expected in run.err and len(run.err.strip().splitlines()) == 1, (args, run.err)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL not installed (tox -e trl)")
def test_two_grpo_steps_on_cpu_write_metrics_and_trajectories(
    tasks: Path, sample_dataset: Path, tiny_model: Path, tmp_path: Path
) -> None:
    """The tiny model taught the call format (trade-train's fixture, shared with tox -e eval and vllm), so some
    first replies are well-formed calls; the trained model goes to the run folder, the taught one is untouched;
    a plugin's ``trade_step_metrics`` hears each step's line as it is written."""
    from trade_core import hookimpl
    from trade_core.plugins import get_manager
    from trade_core.testing import inline_plugin
    from trade_records.metrics import TRL_CLIPPED, read_metrics
    from trade_records.runfolder import METRICS, ROLLOUTS, step_file
    from trade_train.trl_grpo.run import train

    heard: list[tuple[str, int, dict[str, float]]] = []

    class Listener:
        @hookimpl
        def trade_step_metrics(self, trainer: str, step: int, metrics: dict[str, float]) -> None:
            heard.append((trainer, step, dict(metrics)))

    run_dir = tmp_path / "run"
    config = RunConfig(
        model=str(tiny_model),
        tasks=tasks,
        data=sample_dataset,
        reward="bucketed",
        device="cpu",
        run_dir=run_dir,
        grpo=GRPOSettings(steps=2),
    )
    taught = {path.name: path.stat().st_mtime_ns for path in tiny_model.iterdir()}
    started = time.perf_counter()
    with inline_plugin(get_manager(), Listener(), "listener"):
        out = train(config)
    print(f"2 GRPO steps on CPU: {time.perf_counter() - started:.1f} s")
    assert (out / "config.json").is_file()
    assert {path.name: path.stat().st_mtime_ns for path in tiny_model.iterdir()} == taught
    lines = [json.loads(line) for line in (run_dir / METRICS).read_text().splitlines()]
    assert [line.step for line in read_metrics(run_dir)] == [1, 2]  # each line is whole and ours
    assert [line["step"] for line in lines] == [1, 2]
    # the event carries our metrics as the step ends; the line adds TRL's own clipped ratio, logged after it
    assert all(0.0 <= line[TRL_CLIPPED] <= 1.0 for line in lines)
    ours = [{k: v for k, v in line.items() if k.startswith("trade/")} for line in lines]
    assert heard == [("trl-grpo", line["step"], metrics) for line, metrics in zip(lines, ours, strict=True)]
    for line in lines:
        assert line["trade/trajectories"] == 4 and line["trade/groups"] == 1
        assert {"trade/reward/score/mean", "trade/stop_rate", "trade/tool_error_rate"} <= line.keys()
        assert "trade/zero_variance_groups" in line and "trade/failure/no_stop" in line
    records = [r for step in (1, 2) for r in read_trajectories(step_file(run_dir / ROLLOUTS, step))]
    assert len(records) == 8 and {r.source for r in records} == {"trl-grpo"} and {r.step for r in records} == {1, 2}
    assert any(m.tool_calls for r in records for m in r.messages)
    assert all(r.reward is not None and r.ground_truth is not None for r in records)


def test_verl_grpo_refuses_the_cpu_in_one_line(tasks: Path, tmp_path: Path) -> None:
    run = run_trade(
        "train",
        "--model",
        HUB_MODEL,
        "--tasks",
        str(tasks),
        "--device",
        "cpu",
        "--dry-run",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert run.code == 2, run.err
    assert "verl-grpo trains on npu or gpu, not cpu (use --trainer trl-grpo on cpu)" in run.err
    assert not (tmp_path / "run").exists()
