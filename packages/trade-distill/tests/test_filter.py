"""`trade distill filter` on trajectories from real `trade eval` runs, and on copies edited to fail each rule."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trade_core.cli import build_cli
from trade_core.hookspecs import hookimpl
from trade_core.plugins import get_manager
from trade_core.testing import inline_plugin
from trade_distill.builtin import MalformedCalls
from trade_distill.filters import Filter, TrajectoryFilter
from trade_tools.trajectory import (
    BOM,
    FunctionCall,
    Message,
    ToolCall,
    Trajectory,
    read_trajectories,
    write_trajectories,
)

WINNER, LOSER = "test-2025-07-01-0", "test-2025-07-01-1"


def distill(*args: str) -> Any:
    return CliRunner().invoke(build_cli(get_manager()), ["distill", "filter", *args])


def by_task(run: Path) -> dict[str, Trajectory]:
    return {t.task_id: t for t in read_trajectories(run / "trajectories.jsonl")}


def refused_call(trajectory: Trajectory, name: str, arguments: str) -> Trajectory:
    """``trajectory`` with one more call, answered by the real Episode's text for it."""
    open_episode = trajectory.episode.model_copy(deep=True, update={"status": "open"})
    call = ToolCall(id="bad", function=FunctionCall(name=name, arguments=arguments))
    added = [
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id="bad", content=open_episode.call(name, arguments)),
    ]
    return trajectory.model_copy(update={"messages": [*trajectory.messages[:-1], *added, trajectory.messages[-1]]})


@pytest.fixture(scope="module")
def edited(tasks_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Copies of real trajectories, each made to fail one rule (a losing one fails two: counted by the first)."""
    tasks = by_task(tasks_run)
    winner, loser = tasks[WINNER], tasks[LOSER]
    markup = Message(role="assistant", content='<tool_call>{"name": "TakeAction", "arguments": {"type": "stop"}}')
    made = [
        refused_call(winner, "TakeAction", '{"type": "buy", "symbol": '),
        winner.model_copy(update={"messages": [*winner.messages, markup]}),
        loser.model_copy(update={"episode": loser.episode.model_copy(update={"status": "truncated"})}),
        winner.model_copy(update={"id": "copy"}),
    ]
    return write_trajectories(tmp_path_factory.mktemp("edited") / "edited.jsonl", made)


@pytest.mark.real_data
def test_each_rule_counts_what_it_removed_in_order(
    backtest_run: Path, tasks_run: Path, edited: Path, tmp_path: Path
) -> None:
    out = tmp_path / "kept.jsonl"
    done = distill(str(backtest_run), str(tasks_run), str(edited), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "read 16 trajectories from 3 input(s)",
        "  malformed-calls  removed 2 (1 malformed tool call, 1 tool-call markup left as text)",
        "  not-stopped      removed 1 (1 status truncated)",
        "  nav-return       removed 4 (4 return below threshold) [threshold=0.0]",
        "  duplicates       removed 1 (1 duplicate conversation)",
        f"kept 8 -> {out}",
    ]
    inputs = [t.id for run in (backtest_run, tasks_run) for t in read_trajectories(run / "trajectories.jsonl")]
    kept = [t.id for t in read_trajectories(out)]
    assert kept == [i for i in inputs if i in kept] and WINNER in {t.task_id for t in read_trajectories(out)}
    assert all(json.loads(line)["version"] == 2 for line in out.read_text().splitlines())


@pytest.mark.real_data
def test_a_backtest_day_is_kept_when_the_nav_rose_at_the_next_close(backtest_run: Path, tmp_path: Path) -> None:
    """The rule reads the ground truth the backtest attaches; the check reads only the backtest's own NAVs."""
    days = [json.loads(line) for line in (backtest_run / "days.jsonl").read_text().splitlines()]
    rose = [after["value_before"] > day["value_before"] for day, after in itertools.pairwise(days)]
    out = tmp_path / "kept.jsonl"
    done = distill(str(backtest_run), "--rule", "nav-return", "--out", str(out))
    assert done.exit_code == 0, done.output
    kept = {t.task_id for t in read_trajectories(out)}
    assert [f"backtest-{day['date']}" in kept for day in days[:-1]] == rose and True in rose and False in rose


def test_dry_run_only_counts(tasks_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.jsonl"
    done = distill(str(tasks_run / "trajectories.jsonl"), "--out", str(out), "--dry-run")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == "kept 4 (dry run: nothing written)" and not out.exists()


@pytest.mark.real_data
def test_chosen_rules_run_alone_with_their_settings(tasks_run: Path, edited: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.jsonl"
    done = distill(str(tasks_run), "--rule", "nav-return", "--set", "nav-return.threshold=0.01", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert "removed 5 (5 return below threshold) [threshold=0.01]" in done.output
    assert [t.task_id for t in read_trajectories(out)] == [WINNER]
    done = distill(str(tasks_run), str(edited), "--rule", "duplicates", "--rule", "not-stopped", "--dry-run")
    # the truncated copy repeats its original's conversation: removed by the first rule, duplicates
    assert [line.split()[:3] for line in done.output.splitlines()[1:3]] == [
        ["duplicates", "removed", "2"],
        ["not-stopped", "removed", "0"],
    ]


def test_the_return_comes_from_the_ground_truth_when_there_is_no_reward(tasks_run: Path, tmp_path: Path) -> None:
    unscored = [t.model_copy(update={"reward": None}) for t in read_trajectories(tasks_run / "trajectories.jsonl")]
    path = write_trajectories(tmp_path / "unscored.jsonl", unscored)
    done = distill(str(path), "--rule", "nav-return", "--dry-run")
    assert "removed 2 (2 return below threshold)" in done.output, done.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rule", "nope"], "error: unknown filter 'nope' (valid: duplicates, malformed-calls, nav-return, "),
        (["--set", "nav-return.limit=1"], "error: --set nav-return.limit: rule 'nav-return' has no option 'limit'"),
        (["--set", "nav-return.threshold=high"], "error: --set nav-return.threshold='high': expected a float"),
        (["--rule", "duplicates", "--set", "nav-return.threshold=1"], "error: --set nav-return.threshold: no rule"),
    ],
)
def test_a_wrong_rule_or_setting_is_one_line(args: list[str], message: str, tasks_run: Path, tmp_path: Path) -> None:
    done = distill(str(tasks_run), *args, "--out", str(tmp_path / "kept.jsonl"))
    assert done.exit_code == 2 and done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "kept.jsonl").exists()


def test_a_missing_input_is_one_line(tmp_path: Path) -> None:
    done = distill(str(tmp_path), "--dry-run")
    assert done.exit_code == 2 and done.stderr.startswith(f"error: {tmp_path}: no trajectories found"), done.stderr


class FewTurns(TrajectoryFilter):
    name = "few-turns"
    description = "fewer assistant turns than asked"
    options: Mapping[str, Any] = {"turns": 2}

    def reason(self, trajectory: Trajectory, options: Mapping[str, Any]) -> str | None:
        return "few turns" if trajectory.episode.turns < options["turns"] else None


class UserFilters:
    @hookimpl
    def trade_register_filters(self, register: Callable[[Filter], None]) -> None:
        register(FewTurns())


def test_a_users_filter_plugin_runs_by_name(tasks_run: Path) -> None:
    turns = [t.episode.turns for t in read_trajectories(tasks_run / "trajectories.jsonl")]
    with inline_plugin(get_manager(), UserFilters(), "user-filters"):
        done = distill(str(tasks_run), "--rule", "few-turns", "--set", f"few-turns.turns={max(turns) + 1}", "--dry-run")
    assert done.exit_code == 0, done.output
    assert f"few-turns  removed {len(turns)} ({len(turns)} few turns) [turns={max(turns) + 1}]" in done.output


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("Trade", "{}"),
        ("TakeAction", '{"type": '),
        ("TakeAction", "[1]"),
        ("TakeAction", "{}"),
        ("TakeAction", '{"type": "stop", "date": "2025-07-01"}'),
        ("TakeAction", '{"type": "hold"}'),
    ],
)
def test_every_call_the_episode_refuses_as_malformed_is_found(name: str, arguments: str, tasks_run: Path) -> None:
    """The Episode's own texts: unknown tool, not JSON, not an object, missing, extra and invalid arguments."""
    clean = by_task(tasks_run)[WINNER]
    assert MalformedCalls().reason(clean, {}) is None
    assert MalformedCalls().reason(refused_call(clean, name, arguments), {}) == "malformed tool call"


def test_a_last_line_cut_short_is_left_out_with_a_warning_and_a_bom_is_read(tasks_run: Path, tmp_path: Path) -> None:
    """A run killed mid-write leaves its last line cut short, and some editors save a BOM: either refused the
    whole file. A line cut short with lines after it is still an error."""
    lines = (tasks_run / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
    killed = tmp_path / "killed.jsonl"
    killed.write_bytes(BOM + b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    done = distill(str(killed), "--dry-run")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("read 3 trajectories from 1 input(s); left out 1 last line(s) cut short\n")
    assert done.stderr.startswith(f"warning: {killed}:4: the last line is cut short (") and "left out" in done.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(lines[0] + lines[3][: len(lines[3]) // 2] + b"\n" + lines[1])
    done = distill(str(broken), "--dry-run")
    assert done.exit_code == 2 and done.stderr.startswith(f"error: {broken}:2: not a trajectory ("), done.stderr
