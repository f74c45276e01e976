"""`trade train`: the run folder, the resolved command, and verl's own validation of the composed config."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_tools.episode import Episode, Task
from trade_tools.grading import GroundTruth
from trade_train.verl_grpo import schema
from trade_train.verl_grpo.schema import AGENT_NAME

needs_verl = pytest.mark.skipif(
    importlib.util.find_spec("verl") is None, reason="verl 0.9.1 not installed (tox -e verl)"
)


@pytest.mark.skipif(importlib.util.find_spec("swanlab") is not None, reason="checks a missing logger package")
def test_a_logger_whose_package_is_missing_fails_before_launch(tasks: Path, tmp_path: Path) -> None:
    run = run_trade(
        "train",
        "--model",
        "Qwen/Qwen3-4B",
        "--tasks",
        str(tasks),
        "--logger",
        "console",
        "--logger",
        "swanlab",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert run.code == 2  # then the device stack's lines: this machine has no NPU stack
    assert run.err.splitlines()[0] == "error: --logger swanlab needs the swanlab package (pip install swanlab)"
    assert not (tmp_path / "run").exists()


def test_help_works_without_verl() -> None:
    run = run_trade("train", "--help")
    shown = " ".join(run.out.split())  # click wraps the help to the terminal's width
    assert run.code == 0 and "--dry-run" in shown
    assert "Hydra overrides for verl-grpo, KEY=VALUE settings for trl-grpo" in shown
    assert run_trade("train", "export", "--help").code == 0


def test_missing_arguments_and_unknown_names_are_one_line(tasks: Path, tmp_path: Path) -> None:
    run_dir = ["--run-dir", str(tmp_path / "run"), "--dry-run"]  # a launch would add the device stack's lines
    m = "Qwen/Qwen3-4B"  # a hub id: nothing to check here, so each case has one problem
    for args, expected in [
        (run_dir, "--model is required"),
        (["--model", m, *run_dir], "--tasks is required"),
        (["--model", m, "--tasks", str(tmp_path), *run_dir], "is not a tasks folder (no manifest.json)"),
        (["--model", m, "--tasks", str(tasks), "--trainer", "ppo-magic", *run_dir], "unknown trainer 'ppo-magic'"),
        (["--model", m, "--tasks", str(tasks), "--reward", "sharpe", *run_dir], "unknown reward scheme 'sharpe'"),
        (["--model", m, "--tasks", str(tasks), "--logger", "neptune", *run_dir], "unknown logger 'neptune'"),
        (["export", str(tmp_path), "--out", str(tmp_path / "hf")], "holds no verl checkpoint"),
    ]:
        run = run_trade("train", *args)
        assert run.code == 2 and expected in run.err and len(run.err.strip().splitlines()) == 1, (args, run.err)
    assert not (tmp_path / "run").exists()  # nothing written for a run that was refused


def test_the_run_folder_holds_verls_rows_of_the_task_records(tasks: Path, tmp_path: Path) -> None:
    """trade-reward writes trainer-neutral records; the verl trainer writes verl's rows of them into the run."""
    from trade_reward.taskfolder import read_records

    run_dir = tmp_path / "run"
    run_trade("train", "--model", "Qwen/Qwen3-4B", "--tasks", str(tasks), "--run-dir", str(run_dir), "--dry-run")
    command = (run_dir / "command.sh").read_text()
    for split in ("train", "val"):
        assert f"data.{split}_files={run_dir.resolve() / f'{split}.parquet'} " in command
        table = pq.read_table(run_dir / f"{split}.parquet")
        assert table.column_names == ["data_source", "agent_name", "prompt", "ability", "reward_model", "extra_info"]
        records = read_records(tasks, split)
        assert len(table) == len(records) > 0
        for row, record in zip(table.to_pylist(), records, strict=True):
            assert (row["data_source"], row["agent_name"], row["ability"]) == (
                "trade-agent/csi300",
                AGENT_NAME,
                "trading",
            )
            assert row["prompt"] == record.prompt and row["reward_model"]["style"] == "rule"
            assert GroundTruth.model_validate_json(row["reward_model"]["ground_truth"]) == record.ground_truth
            info = row["extra_info"]
            assert (info["index"], info["split"], info["task_id"]) == (record.index, split, record.task.task_id)
            assert Task.model_validate_json(info["task"]) == record.task
    assert f"default_agent_loop={AGENT_NAME} " in command and f"{Path(schema.__file__).resolve()} " in command


def test_node_and_card_counts_below_one_are_usage_errors(tasks: Path, tmp_path: Path) -> None:
    for option in ("--nodes", "--gpus-per-node"):
        run = run_trade(
            "train", "--model", "Qwen/Qwen3-4B", "--tasks", str(tasks), option, "0", "--run-dir", str(tmp_path / "run")
        )
        assert run.code == 2 and f"Invalid value for '{option}': 0 is not in the range x>=1" in run.err, run.err
    assert not (tmp_path / "run").exists()


@needs_verl
@pytest.mark.parametrize("device", ["npu", "gpu"])
def test_dry_run_composes_a_config_verl_accepts(device: str, tasks: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / f"run-{device}"
    # floats where verl's YAML default is an int (its dataclasses declare float), and null, are accepted
    run = run_trade(
        "train",
        "--model",
        "Qwen/Qwen3-4B",
        "--tasks",
        str(tasks),
        "--device",
        device,
        "--run-dir",
        str(run_dir),
        "--dry-run",
        "--",
        "trainer.total_epochs=2",
        "actor_rollout_ref.rollout.top_p=0.9",
        "actor_rollout_ref.actor.entropy_coeff=0.001",
        "actor_rollout_ref.rollout.val_kwargs.temperature=0.6",
        "trainer.total_training_steps=null",
    )
    assert run.code == 0, run.err
    assert "dry run: config valid; nothing launched" in run.out
    summary = json.loads(run.out[run.out.index("{") : run.out.rindex("}") + 1])
    assert summary["algorithm"] == "grpo" and summary["gpus"] == 8 and summary["agent_loop"] == "trading_agent"
    assert summary["device"] == ("npu" if device == "npu" else "cuda")
    assert "format=hermes" in summary["rollout"]
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "agent_loops.yaml",
        "command.sh",
        "env.json",
        "spec.json",
        "tools.yaml",
        "train.parquet",
        "val.parquet",
    ]
    assert summary["reward"].endswith("trade_train/verl_grpo/schema.py:compute_score")
    command = (run_dir / "command.sh").read_text()
    assert "trade_train.verl_grpo.main" in command and "trainer.total_epochs=2" in command
    assert ("HCCL_CONNECT_TIMEOUT=1500" in command) == (device == "npu")


@needs_verl
def test_verl_loads_compute_score_from_the_planned_path(tasks: Path, sample_store: MarketStore, tmp_path: Path) -> None:
    """verl's own loader finds the reward function where the plan points, and it scores a row of the run."""
    from verl.utils.import_utils import load_extern_object

    run_dir = tmp_path / "run"
    run_trade("train", "--model", "Qwen/Qwen3-4B", "--tasks", str(tasks), "--run-dir", str(run_dir), "--dry-run")
    found = re.search(r"reward\.custom_reward_function\.path=(\S+) ", (run_dir / "command.sh").read_text())
    assert found is not None
    compute_score = load_extern_object(module_path=found.group(1), object_name="compute_score")
    row = pq.read_table(run_dir / "train.parquet").to_pylist()[0]
    episode = Episode.start(Task.model_validate_json(row["extra_info"]["task"]), sample_store)
    episode.call("TakeAction", {"type": "stop", "reasoning": "不调仓"})
    truth = row["reward_model"]["ground_truth"]
    scored = compute_score(row["data_source"], "", truth, {schema.EPISODE: episode.model_dump_json()})
    assert (scored["score"], scored["r_outcome"], scored["failure"]) == (0.0, 0.0, "")


@needs_verl
@pytest.mark.parametrize("dry_run", [["--dry-run"], []], ids=["dry-run", "launch"])
def test_verl_rejects_a_wrong_override_in_one_line(dry_run: list[str], tasks: Path, tmp_path: Path) -> None:
    # trainer.device=cpu: the launch's preflight then checks the CPU stack, the one installed here
    run = run_trade(
        "train",
        "--model",
        "Qwen/Qwen3.5-4B",
        "--tasks",
        str(tasks),
        "--run-dir",
        str(tmp_path / "r"),
        *dry_run,
        "--",
        "trainer.device=cpu",
        "trainer.no_such_key=1",
    )
    assert run.code == 2 and "verl rejects the config" in run.err and len(run.err.strip().splitlines()) == 1
    assert "launching" not in run.out  # checked before anything starts
    assert "multi_turn.format=qwen3_coder" in (tmp_path / "r" / "command.sh").read_text()  # Qwen3.5 -> XML tool calls


@needs_verl
def test_an_override_of_the_wrong_type_names_the_key_and_the_type(tasks: Path, tmp_path: Path) -> None:
    run = run_trade(
        "train",
        "--model",
        "Qwen/Qwen3-4B",
        "--tasks",
        str(tasks),
        "--run-dir",
        str(tmp_path / "r"),
        "--dry-run",
        "--",
        "actor_rollout_ref.rollout.n=abc",
    )
    expected = "actor_rollout_ref.rollout.n=abc: expected an int (verl's default: 1)"
    assert run.code == 2 and run.err.strip() == f"error: verl rejects the config: TypeError: {expected}"


@needs_verl
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.use_v1=abc", "trainer.use_v1=abc: expected a bool (verl's default: True)"),
        ("actor_rollout_ref.actor.optim.lr=fast", "actor_rollout_ref.actor.optim.lr=fast: expected a number"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=16.5", "ppo_mini_batch_size=16.5: expected an int"),
        ("trainer.nnodes=true", "trainer.nnodes=true: expected a number (verl's default: 1)"),
        ("data.train_batch_size=abc", "data.train_batch_size=abc: expected a number (verl's default: 1024)"),
    ],
)
def test_override_types_are_checked_against_what_verl_declares(override: str, expected: str) -> None:
    from trade_train.verl_grpo.compose import compose

    with pytest.raises(TypeError, match=re.escape(expected)):
        compose(["trainer.total_epochs=2", override])


def test_a_model_folder_that_is_not_there_fails_before_anything_is_written(tasks: Path, tmp_path: Path) -> None:
    hint = "(pass a Hugging Face model folder or a hub id ORG/NAME)"
    for model, problem in [
        ("/models/Qwen3-4B", "does not exist"),
        ("./Qwen3-4B", "does not exist"),
        ("Qwen3-4B", "does not exist"),
    ]:
        run = run_trade(
            "train",
            "--model",
            model,
            "--tasks",
            str(tasks),
            "--run-dir",
            str(tmp_path / "run"),
            "--dry-run",
            cwd=tmp_path,
        )
        assert run.code == 2 and run.err.strip() == f"error: model folder {model} {problem} {hint}", run.err
    assert not (tmp_path / "run").exists()


def test_a_relative_model_folder_reaches_verl_as_an_absolute_path(tasks: Path, tmp_path: Path) -> None:
    """verl runs in the run folder, where a path relative to the user's folder would name nothing."""
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text('{"model_type": "qwen3"}')
    (tmp_path / "tiny" / "tokenizer.json").write_text("{}")
    run_trade("train", "--model", "tiny", "--tasks", str(tasks), "--run-dir", "run", "--dry-run", cwd=tmp_path)
    assert f"actor_rollout_ref.model.path={tmp_path / 'tiny'} " in (tmp_path / "run" / "command.sh").read_text()


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="checks the light install, without verl")
def test_dry_run_without_verl_writes_the_plan_and_says_what_to_install(tasks: Path, tmp_path: Path) -> None:
    run = run_trade(
        "train", "--model", "Qwen/Qwen3-4B", "--tasks", str(tasks), "--run-dir", str(tmp_path / "r"), "--dry-run"
    )
    assert run.code == 2 and run.err.strip().startswith("error: verl is not installed here")
    assert run.err.strip().endswith("pip install 'trade-train[verl]')")  # a CPU check: no GPU or NPU extra
    assert "trade_train.verl_grpo.main" in run.out and (tmp_path / "r" / "tools.yaml").is_file()


@needs_verl
def test_a_real_launch_reaches_verls_trainer_with_the_trading_metrics(tasks: Path, tmp_path: Path) -> None:
    """`trade train` without --dry-run starts Ray and verl's TaskRunner, which installs the trading metrics.

    On this CPU-only machine verl then waits for accelerators, so the launch is stopped once the
    TaskRunner (a Ray actor process) has reported the install; a GPU runs on (scripts/gpu-smoke.sh).
    """
    from trade_train.tiny.model import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    trade = str(Path(sys.executable).with_name("trade"))
    command = [
        trade,
        "train",
        "--model",
        str(model),
        "--tasks",
        str(tasks),
        "--device",
        "gpu",
        "--gpus-per-node",
        "1",
        "--run-dir",
        str(tmp_path / "run"),
        "--",
        "trainer.device=cpu",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=tmp_path
    )
    deadline = time.monotonic() + 300
    seen = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if "trade-train: trading metrics" in line or time.monotonic() > deadline:
                break
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    report = next((line for line in seen if "trade-train: trading metrics" in line), "")
    assert "TradeTaskRunner" in report and "sync" in report, "".join(seen[-30:])
    assert (tmp_path / "run" / "command.sh").is_file()


def test_a_trainer_from_a_plugin_is_planned_by_name(tasks: Path, tmp_path: Path) -> None:
    """Trainers are plugins: one registered by another package is found by name, planned and checked."""
    from trade_core.errors import TradeError
    from trade_core.hookspecs import hookimpl
    from trade_core.plugins import get_manager
    from trade_core.testing import inline_plugin
    from trade_train.trainer import TRAINERS, RunPlan, Trainer, TrainSpec

    class Echo(Trainer):
        name = "echo"
        description = "prints the model it would train"

        def plan(self, spec: TrainSpec) -> RunPlan:
            return RunPlan(run_dir=spec.run_dir, command=["echo", spec.model], env={}, files={"spec.json": "{}"})

        def check(self, plan: RunPlan) -> str:
            return f"would run {' '.join(plan.command)}"

    class Plugin:
        @hookimpl
        def trade_register_trainers(self, register):  # type: ignore[no-untyped-def]
            register(Echo())

    with inline_plugin(get_manager(), Plugin(), "echo-trainer"):
        echo = TRAINERS.get("echo")
        assert TRAINERS.get("verl-grpo").name == "verl-grpo"  # the built-in is a plugin like it
        plan = echo.plan(TrainSpec(model="m", tasks=tasks, run_dir=tmp_path / "run"))
        plan.write()
        assert echo.check(plan) == "would run echo m" and (tmp_path / "run" / "command.sh").is_file()
        assert plan.launch() == 0
    with pytest.raises(TradeError, match="unknown trainer 'echo'"):
        TRAINERS.get("echo")
