"""The repository's scripts run (scripts/ is not part of any package)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from trade_data.store import MarketStore

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.qlib
def test_the_alpha158_script_checks_the_shipped_table_against_qlib() -> None:
    pytest.importorskip("qlib")
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "alpha158_table.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _copy_bound() -> ModuleType:
    spec = importlib.util.spec_from_file_location("copy_bound", SCRIPTS / "copy_bound.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.parametrize(("kind", "prefix"), [("full", "排序（从高到低）："), ("top", "最高：")])
def test_the_copy_bound_ranking_line_lists_the_ranking_below_it(
    sample_store: MarketStore, monkeypatch: pytest.MonkeyPatch, kind: str, prefix: str
) -> None:
    from trade_tools.builtins.alpha_factor import ComputeAlphaFactor
    from trade_tools.episode import Episode
    from trade_tools.sampler import day_task

    monkeypatch.setattr(ComputeAlphaFactor, "run", ComputeAlphaFactor.run)  # put back after the test
    _copy_bound().with_ranking_line(kind)
    date = sample_store.calendar[200].date().isoformat()
    episode = Episode.start(day_task(sample_store, date, pool_size=6, seed=1), sample_store)
    *rows, line = episode.call("compute_alpha_factor", {"expression": "KMID"}).splitlines()
    ranked = [row.split(". ", 1)[1].rsplit(": ", 1)[0] for row in rows if row[:1].isdigit()]
    assert len(ranked) == 6 and line == prefix + ("、".join(ranked) if kind == "full" else ranked[0])


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "trade_train")),
    reason="needs torch, transformers, trade-train[tiny] (tox -e trl)",
)
def test_the_copy_bound_script_fine_tunes_and_evaluates_the_held_out_tasks(tmp_path: Path) -> None:
    args = ["--out", str(tmp_path), "--anonymize", "--ranking-line", "full", "--sft-steps", "3"]
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "copy_bound.py"), *args, "--samples", "1", "--tasks", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "fine-tune: 3 steps" in run.stdout and "2 episodes: 2 played" in run.stdout, run.stdout
    assert (tmp_path / "evaluate" / "summary.json").is_file()
    again = subprocess.run(  # a rerun into the folder keeps its market and tasks and redoes the rest
        [sys.executable, str(SCRIPTS / "copy_bound.py"), *args, "--samples", "1", "--tasks", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert again.returncode == 0 and "1 episodes: 1 played" in again.stdout, again.stderr[-2000:]


def test_the_copy_bound_script_refuses_a_count_below_one_in_one_line(tmp_path: Path) -> None:
    args = [sys.executable, str(SCRIPTS / "copy_bound.py"), "--out", str(tmp_path / "x"), "--sft-steps", "0"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and run.stderr.splitlines()[-1].endswith("'0' is not a whole number above 0")
    assert not (tmp_path / "x").exists()


def test_copy_bound_draws_each_demonstration_day_under_other_aliases(sample_dataset: Path, tmp_path: Path) -> None:
    """`--alias-draws K`: K distinct demonstrations of one day (the same day, pool and market, other aliases in the
    prompt), so the fine-tune cannot memorise a day's answer from its prompt."""
    from trade_reward.taskbuilder import build_tasks
    from trade_reward.taskfolder import read_records

    build_tasks(sample_dataset, tmp_path / "t", split="train=2025-05-06:2025-06-06", pool_size="6", anonymize=True)
    records = read_records(tmp_path / "t", "train")[:2]
    drawn = _copy_bound().redrawn(records, 3, MarketStore.load(sample_dataset))
    assert [r.task.task_id for r in drawn[:3]] == [records[0].task.task_id + s for s in ("", "~1", "~2")]
    assert drawn[0] == records[0] and len(drawn) == 6
    for one in (drawn[:3], drawn[3:]):
        assert len({r.task.date for r in one}) == 1 and len({tuple(r.task.pool) for r in one}) == 1
        assert len({r.prompt[-1]["content"] for r in one}) == 3  # the pool's aliases differ


def test_copy_bound_refuses_alias_draws_without_anonymize(tmp_path: Path) -> None:
    args = [sys.executable, str(SCRIPTS / "copy_bound.py"), "--out", str(tmp_path / "x"), "--alias-draws", "3"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and run.stderr.splitlines()[-1].endswith("--alias-draws draws aliases: add --anonymize")
    assert not (tmp_path / "x").exists()
