"""`trade distill export` on real backtest days: ms-swift agent rows, reasoning inline or stripped, bad input one line.

The ms-swift encoding of the rows is checked in test_swift_lora.py (`tox -e swift`); here only what needs no ms-swift.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trade_core.cli import build_cli
from trade_core.errors import TradeError
from trade_core.plugins import get_manager
from trade_core.testing import run_trade
from trade_distill.swift_check import has_swift
from trade_distill.swift_lora import parse_flags
from trade_tools.trajectory import BOM, read_trajectories, write_trajectories


def trade(*args: str) -> Any:
    return CliRunner().invoke(build_cli(get_manager()), list(args))


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_day_becomes_its_prompt_its_calls_in_order_and_no_trailing_results(
    prompted_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "train.jsonl"
    done = trade("distill", "export", str(prompted_run), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == ["read 6 trajectories from 1 input(s)", f"wrote 6 rows -> {out}"]
    days = list(read_trajectories(prompted_run / "trajectories.jsonl"))
    for row, day in zip(rows(out), days, strict=True):
        calls = day.messages[2].tool_calls or []
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"] + ["tool_call"] * len(calls)
        assert row["messages"][0]["content"] == day.messages[0].content and "股票池" in row["messages"][1]["content"]
        sent = [json.loads(m["content"]) for m in row["messages"][3:]]
        assert sent == [{"name": c.function.name, "arguments": json.loads(c.function.arguments)} for c in calls]
        assert json.loads(row["tools"]) == day.episode.tool_schemas()


def test_reasoning_is_inline_as_think_or_stripped(prompted_run: Path, tmp_path: Path) -> None:
    day = next(read_trajectories(prompted_run / "trajectories.jsonl"))
    first = day.messages[2].model_copy(update={"reasoning_content": "先看动量。", "content": "买入。"})
    inline = day.messages[2].model_copy(update={"content": "<think>\n先看动量。\n</think>\n\n买入。"})
    for reply in (first, inline):
        source = write_trajectories(
            tmp_path / "day.jsonl", [day.model_copy(update={"messages": [*day.messages[:2], reply, *day.messages[3:]]})]
        )
        for flag, expected in (((), "<think>\n先看动量。\n</think>\n\n买入。"), (("--strip-thinking",), "买入。")):
            done = trade("distill", "export", str(source), "--out", str(tmp_path / "rows.jsonl"), *flag)
            assert done.exit_code == 0, done.output
            assert rows(tmp_path / "rows.jsonl")[0]["messages"][2]["content"] == expected


def test_a_baseline_day_has_no_prompt_to_train_on(backtest_run: Path, tmp_path: Path) -> None:
    done = trade("distill", "export", str(backtest_run), "--out", str(tmp_path / "rows.jsonl"))
    assert done.exit_code == 2 and "has no system and user prompt" in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "rows.jsonl").exists()


def test_arguments_that_are_not_an_object_are_refused(prompted_run: Path, tmp_path: Path) -> None:
    day = next(read_trajectories(prompted_run / "trajectories.jsonl"))
    reply = day.messages[2].model_copy(deep=True)
    reply.tool_calls[0].function.arguments = '{"type": "buy", '  # type: ignore[index]
    source = write_trajectories(
        tmp_path / "day.jsonl", [day.model_copy(update={"messages": [*day.messages[:2], reply, *day.messages[3:]]})]
    )
    done = trade("distill", "export", str(source), "--out", str(tmp_path / "rows.jsonl"))
    assert done.exit_code == 2 and "arguments that are not a JSON object" in done.stderr, done.stderr
    assert "trade distill filter" in done.stderr and not (tmp_path / "rows.jsonl").exists()


def test_the_check_settings_need_a_model(prompted_run: Path, tmp_path: Path) -> None:
    done = trade("distill", "export", str(prompted_run), "--out", str(tmp_path / "r.jsonl"), "--max-length", "9")
    assert done.exit_code == 2 and done.stderr.startswith("error: --template, --max-length and --over-length set the")


@pytest.mark.skipif(has_swift(), reason="the line for an environment without ms-swift")
def test_without_ms_swift_the_check_says_how_to_install_it(prompted_run: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    done = trade("distill", "export", str(prompted_run), "--out", str(tmp_path / "r.jsonl"), "--model", str(model))
    assert done.exit_code == 0, done.output
    assert "not checked: ms-swift is not installed here (pip install 'trade-distill[swift]')" in done.output
    assert len(rows(tmp_path / "r.jsonl")) == 6


@pytest.mark.skipif(has_swift(), reason="the error for an environment without ms-swift")
def test_swift_lora_without_ms_swift_fails_before_anything_is_written(prompted_run: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    (model / "tokenizer.json").write_text("{}")
    run_dir = tmp_path / "run"
    done = run_trade(
        "train",
        "--trainer",
        "swift-lora",
        "--model",
        str(model),
        "--dataset",
        str(prompted_run / "trajectories.jsonl"),
        "--run-dir",
        str(run_dir),
        "--dry-run",
    )
    assert done.code == 2 and not run_dir.exists()
    trajectories, no_swift = done.err.splitlines()
    assert trajectories.startswith(f"error: {prompted_run / 'trajectories.jsonl'}:1: not an ms-swift agent row (")
    assert no_swift == "error: swift-lora needs ms-swift in this environment (pip install 'trade-distill[swift]')"


def test_tasks_and_dataset_are_one_or_the_other(tmp_path: Path) -> None:
    done = run_trade("train", "--model", "Qwen/Qwen3-4B", "--tasks", str(tmp_path), "--dataset", str(tmp_path))
    assert done.code == 2 and done.err.startswith("error: --tasks and --dataset are two kinds of training data")


def test_swift_flags_replace_by_name_and_keep_their_values() -> None:
    assert parse_flags(["--max_steps", "2", "--target_modules", "q_proj", "v_proj", "--report_to=swanlab"]) == {
        "max_steps": ["2"],
        "target_modules": ["q_proj", "v_proj"],
        "report_to": ["swanlab"],
    }
    with pytest.raises(TradeError, match="swift argument 'lora' follows no --flag"):
        parse_flags(["lora", "--max_steps", "2"])


ROOT_README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_root_readmes_distil_lines_run_as_written(prompted_run: Path, tmp_path: Path) -> None:
    """The quick tour's filter and export lines, on a model's backtest at ``runs/trader`` (lines that need a
    model folder, ``/models/...``, or an install are the swift tests' own)."""
    block = re.search(r"### Distil.*?```bash\n(.*?)```", ROOT_README.read_text(encoding="utf-8"), re.S)
    assert block is not None
    lines = [line for line in block.group(1).splitlines() if line.startswith("trade ") and "/models/" not in line]
    assert [shlex.split(line)[:3] for line in lines] == [["trade", "distill", "filter"], ["trade", "distill", "export"]]
    shutil.copytree(prompted_run, tmp_path / "runs" / "trader")
    for line in lines:
        run = run_trade(*shlex.split(line)[1:], cwd=tmp_path)
        assert run.code == 0, (line, run.err)
    assert rows(tmp_path / "data" / "train.jsonl")


def test_the_days_before_a_last_line_cut_short_are_exported(prompted_run: Path, tmp_path: Path) -> None:
    lines = (prompted_run / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
    killed = tmp_path / "killed.jsonl"
    killed.write_bytes(BOM + b"".join(lines[:2]) + lines[2][:-30])
    out = tmp_path / "train.jsonl"
    done = trade("distill", "export", str(killed), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        "read 2 trajectories from 1 input(s); left out 1 last line(s) cut short",
        f"wrote 2 rows -> {out}",
    ]
    assert done.stderr.startswith(f"warning: {killed}:3: the last line is cut short (") and len(rows(out)) == 2
