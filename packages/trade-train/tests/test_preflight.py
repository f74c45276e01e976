"""`trade train`'s preflight: what would stop a run, every problem at once, one line each, before anything starts."""

from __future__ import annotations

import importlib.util
import shutil
import time
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_train.install import install_hint
from trade_train.trainer import TRAINERS, TrainSpec
from trade_train.verl_grpo.stack import probe_problems, stack_problems

CPU_TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
MODEL_HINT = (
    "(a Hugging Face model folder holds config.json and one of tokenizer.json, tokenizer.model, vocab.json, vocab.txt)"
)


def missing(*modules: str) -> list[str]:
    return [module for module in modules if importlib.util.find_spec(module) is None]


@pytest.fixture
def model_without_tokenizer(tmp_path: Path) -> Path:
    """What a half-copied checkpoint looks like: the config but no tokenizer files."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    return model


def test_every_problem_is_one_line_and_all_come_at_once(
    tasks: Path, model_without_tokenizer: Path, tmp_path: Path
) -> None:
    half = tmp_path / "half-tasks"
    shutil.copytree(tasks, half)
    (half / "val.jsonl").unlink()
    (tmp_path / "file").write_text("in the way")
    run_dir = tmp_path / "file" / "run"
    run = run_trade(
        "train",
        "--model",
        str(model_without_tokenizer),
        "--tasks",
        str(half),
        "--data",
        str(tmp_path),
        "--reward",
        "sharpe",
        "--logger",
        "neptune",
        "--run-dir",
        str(run_dir),
        "--dry-run",
    )
    assert run.code == 2
    lines = run.err.strip().splitlines()
    assert lines[:3] == [
        f"error: model folder {model_without_tokenizer} has no tokenizer {MODEL_HINT}",
        f"error: tasks folder {half} has no val.jsonl (rebuild it with `trade data tasks`: its default --split "
        "makes train, val and test)",
        f"error: no dataset at {tmp_path} (pass --data DIR: the dataset the tasks were built from)",
    ]
    assert (
        lines[3] == f"error: run folder {run_dir} is not writable: Not a directory: {tmp_path / 'file'} "
        "(choose another --run-dir)"
    )
    assert lines[4].startswith("error: unknown reward scheme 'sharpe'")
    assert lines[5].startswith("error: unknown logger 'neptune'") and len(lines) == 6  # a dry run skips the stack
    assert run.out == ""


@pytest.fixture(scope="module")
def train_and_test_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tasks folder as the quickstart builds it: train and test splits, no val, on a small synthetic market."""
    from trade_data.synth import write_synthetic_market
    from trade_reward.taskbuilder import build_tasks

    root = tmp_path_factory.mktemp("train-test")
    market = write_synthetic_market(root / "market", symbols=30, start="2024-01-01", end="2024-06-30", seed=0)
    build_tasks(market, root / "tasks", split="train=2024-03-01:2024-03-29,test=2024-05-06:2024-05-31", pool_size="5-8")
    return root / "tasks"


def test_trl_grpo_needs_only_the_train_split_and_verl_grpo_still_asks_for_val(
    train_and_test_tasks: Path, tmp_path: Path
) -> None:
    tasks = train_and_test_tasks
    assert {p.name for p in tasks.glob("*.jsonl")} == {"train.jsonl", "test.jsonl"}
    common = ["--model", "Qwen/Qwen3-0.6B", "--tasks", str(tasks), "--dry-run"]
    trl = run_trade("train", "--trainer", "trl-grpo", *common, "--device", "cpu", "--run-dir", str(tmp_path / "trl"))
    assert trl.code == 0, trl.err
    assert "trl-grpo on cpu" in trl.out and (tmp_path / "trl" / "run.json").is_file()
    verl = run_trade("train", "--trainer", "verl-grpo", *common, "--device", "gpu", "--run-dir", str(tmp_path / "verl"))
    assert verl.code == 2 and verl.out == ""
    assert verl.err.strip().splitlines() == [
        f"error: tasks folder {tasks} has no val.jsonl (rebuild it with `trade data tasks`: its default --split "
        "makes train, val and test)"
    ]
    assert not (tmp_path / "verl").exists()


def test_a_folder_without_config_or_tokenizer_is_refused_in_one_line(tasks: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    run = run_trade(
        "train",
        "--model",
        str(tmp_path / "empty"),
        "--tasks",
        str(tasks),
        "--run-dir",
        str(tmp_path / "run"),
        "--dry-run",
    )
    assert (
        run.err.strip() == f"error: model folder {tmp_path / 'empty'} has no config.json and no tokenizer {MODEL_HINT}"
    )


def test_the_real_launch_runs_the_preflight_before_anything_starts(
    tasks: Path, model_without_tokenizer: Path, tmp_path: Path
) -> None:
    """Without --dry-run the same checks run first, plus the device's stack; nothing is written, Ray never starts."""
    run = run_trade(
        "train",
        "--model",
        str(model_without_tokenizer),
        "--tasks",
        str(tasks),
        "--device",
        "gpu",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert run.code == 2 and run.out == ""  # no plan printed, nothing launched
    absent = ", ".join(missing("torch", "vllm", "verl"))  # vllm is never installed on the CPU test machines
    assert run.err.strip().splitlines() == [
        f"error: model folder {model_without_tokenizer} has no tokenizer {MODEL_HINT}",
        f"error: training on CUDA needs {absent}, not installed here (pip install 'trade-train[gpu]')",
    ]
    assert not (tmp_path / "run").exists()  # the plan is written before a launch: none was
    spec = TrainSpec(model=str(model_without_tokenizer), tasks=tasks, device="gpu", run_dir=tmp_path / "run")
    started = time.perf_counter()
    assert len(TRAINERS.get("verl-grpo").preflight(spec, launch=True)) == 2
    seconds = time.perf_counter() - started
    assert seconds < 1, f"{seconds:.1f} s: finding a module imports nothing (verl's import alone takes ~9 s)"


def test_the_npu_stack_hints_keep_an_installed_torch(tasks: Path, tmp_path: Path) -> None:
    run = run_trade(
        "train",
        "--model",
        "Qwen/Qwen3-4B",
        "--tasks",
        str(tasks),
        "--device",
        "npu",
        "--run-dir",
        str(tmp_path / "run"),
    )
    guide = "install them as vllm-ascend's installation guide says: they build against CANN"
    vllm = f"error: training on NPU needs vllm, vllm_ascend, not installed here ({guide})"
    if importlib.util.find_spec("torch") is None:
        first = (
            f"{', '.join(missing('torch', 'torch_npu', 'verl'))}, not installed here (pip install 'trade-train[npu]')"
        )
        expected = [f"error: training on NPU needs {first}", vllm]
    else:  # the [npu] extra pins its torch: naming it would swap the one installed here
        import torch

        first = (
            f"torch_npu, not installed here (install the torch-npu build for torch {torch.__version__} and your "
            "CANN, as vllm-ascend's installation guide says)"
        )
        expected = [f"error: training on NPU needs {first}", vllm]
        if missing("verl"):  # a venv with torch for another job (tox -e trl): verl alone, torch kept
            expected.append(f"error: training on NPU needs verl, not installed here ({install_hint('verl')})")
    assert run.code == 2 and run.err.strip().splitlines() == expected
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="checks an environment without torch")
def test_a_cpu_run_without_torch_names_the_cpu_wheel() -> None:
    [problem] = stack_problems("cpu")
    absent = ", ".join(missing("torch", "verl"))
    assert (
        str(problem) == f"training on CPU needs {absent}, not installed here ({CPU_TORCH} && pip install "
        "'trade-train[verl]')"
    )


@pytest.mark.skipif(missing("torch", "verl") != [], reason="needs torch and verl (tox -e verl)")
def test_an_installed_cpu_stack_passes_and_a_cpu_torch_cannot_train_on_cuda() -> None:
    import torch

    assert stack_problems("cpu") == []  # found, and it imports
    if torch.version.cuda is None:
        [problem] = probe_problems("cuda")
        assert problem.message == f"torch cannot train on CUDA: torch {torch.__version__} is not a CUDA build"
        assert problem.hint == "install vLLM's CUDA torch: pip install 'trade-train[gpu]' in a fresh venv"
