"""The shared records: a Trajectory carries its ground truth and reward typed, and version-1 files still read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from trade_core.errors import TradeError
from trade_tools.episode import Episode
from trade_tools.grading import GroundTruth, Reward
from trade_tools.portfolio import MAX_CASH, MAX_SHARES, impossible
from trade_tools.records import Task, parse
from trade_tools.trajectory import TRAJECTORY_VERSION, Trajectory, read_trajectories, write_trajectories

POOL = ["SH600519", "SZ000001"]
TRUTH = {
    "date": "2024-06-14",
    "horizon_dates": ["2024-06-17", "2024-06-18", "2024-06-19"],
    "close": {s: 10.0 for s in POOL},
    "growth": {s: [1.0, 1.01, 0.99] for s in POOL},
}


@pytest.fixture
def stopped(open_day) -> Episode:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL)
    day.call("TakeAction", '{"type": "stop", "reasoning": "观望"}')
    return day


def version_1(episode: Episode, reward: dict | None) -> str:
    """A line as `trade train` wrote it before the records were typed: everything inside ``reward``."""
    return json.dumps(
        {
            "version": 1,
            "id": "old",
            "task_id": "t",
            "source": "verl",
            "model": "m",
            "created_at": "2025-01-01T00:00:00+00:00",
            "episode": json.loads(episode.model_dump_json()),
            "messages": [],
            "reward": reward,
        }
    )


def test_version_1_lines_are_converted_on_read(stopped: Episode, tmp_path: Path) -> None:
    failed = {
        "score": -3.0,
        "scheme": "bucketed",
        "r_new": 0.0,
        "r_orig": 0.0,
        "r_outcome": 0.0,
        "bucket": -99,
        "penalty": 0.0,
        "failure": "no_stop",
        "step": 12,
        "ground_truth": json.dumps(TRUTH),
    }
    scored = {**failed, "score": 1.0, "bucket": 1, "failure": "", "ground_truth": TRUTH}
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(version_1(stopped, r) for r in (failed, scored, None)) + "\n")
    first, second, unscored = read_trajectories(path)
    assert first.version == second.version == TRAJECTORY_VERSION == 2
    assert first.step == second.step == 12 and unscored.step is None
    assert first.ground_truth == second.ground_truth == GroundTruth.model_validate(TRUTH)
    assert first.reward == Reward(
        score=-3.0, scheme="bucketed", r_new=0.0, r_orig=0.0, r_outcome=0.0, failure="no_stop"
    )
    assert (second.reward.bucket, second.reward.failure) == (1, None)
    assert unscored.reward is None and unscored.ground_truth is None
    assert unscored.episode.model_dump() == stopped.model_dump()
    again = write_trajectories(tmp_path / "new.jsonl", [first, second, unscored])
    assert list(read_trajectories(again)) == [first, second, unscored]
    assert all(json.loads(line)["version"] == 2 for line in again.read_text().splitlines())


def test_a_version_1_line_that_is_not_a_trajectory_is_still_refused(stopped: Episode, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(version_1(stopped, {"score": 1.0, "ground_truth": "{not json"}) + "\n")
    with pytest.raises(TradeError, match=r"bad.jsonl:1: not a trajectory"):
        list(read_trajectories(path))


def test_records_parse_from_json_text_or_decoded_objects() -> None:
    assert parse(GroundTruth, json.dumps(TRUTH)) == parse(GroundTruth, TRUTH) == GroundTruth.model_validate(TRUTH)


def test_a_trajectory_is_written_whole_or_not_at_all(stopped: Episode, tmp_path: Path) -> None:
    path = write_trajectories(
        tmp_path / "day.jsonl", [Trajectory(task_id="t", source="test", episode=stopped, messages=[])]
    )
    before = path.read_bytes()

    def broken():  # type: ignore[no-untyped-def]
        yield Trajectory(task_id="u", source="test", episode=stopped, messages=[])
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_trajectories(path, broken())
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["day.jsonl"]


PLAIN_KEYS = ["task_id", "date", "pool", "holdings", "cost_basis", "cash", "universe", "index"]
"""A task's keys before it could name its tools, prompt set or anonymization."""


def test_a_plain_task_serialises_as_before() -> None:
    """Task files, verl rows and trajectories of plain tasks keep their bytes: no key for an unset field."""
    task = Task(task_id="t", date="2024-06-14", pool=POOL, cash=1e6)  # type: ignore[arg-type]
    assert list(task.model_dump()) == PLAIN_KEYS
    assert list(json.loads(task.model_dump_json())) == PLAIN_KEYS
    assert task.model_dump_json() == (
        '{"task_id":"t","date":"2024-06-14","pool":["SH600519","SZ000001"],"holdings":{},"cost_basis":{},'
        '"cash":1000000.0,"universe":"csi300","index":"SH000001"}'
    )


def test_tools_and_prompt_set_are_written_when_set_and_read_back() -> None:
    task = Task(task_id="t", date="2024-06-14", pool=POOL, cash=1e6, tools=["TakeAction"], prompt_set="compact")  # type: ignore[arg-type]
    data = json.loads(task.model_dump_json())
    assert list(data) == [*PLAIN_KEYS, "tools", "prompt_set"]
    assert (data["tools"], data["prompt_set"]) == (["TakeAction"], "compact")
    assert Task.model_validate_json(task.model_dump_json()) == task
    empty = Task(task_id="t", date="2024-06-14", pool=POOL, cash=1e6, tools=[])  # type: ignore[arg-type]
    assert json.loads(empty.model_dump_json())["tools"] == []  # not a plain task: Episode.start refuses it


BEYOND = [
    {"cash": math.inf},
    {"cash": math.nan},
    {"cash": MAX_CASH * 1.01},
    {"cash": -1.0},
    {"cash": 1e6, "holdings": {"SZ000001": 10**15}},
    {"cash": 1e6, "holdings": {"SZ000001": -100}},
]
"""Task fields beyond the bounds of what a portfolio can hold."""


def test_a_portfolio_beyond_the_bounds_is_refused_where_it_is_read(stopped: Episode) -> None:
    """Cash of 1e308 or 10^15 shares are finite but impossible: a task or episode holding them does not read."""
    task = {"task_id": "t", "date": "2024-06-14", "pool": POOL}
    assert Task(**task, cash=MAX_CASH, holdings={"SZ000001": MAX_SHARES}).cash == MAX_CASH
    for bad in BEYOND:
        with pytest.raises(ValidationError) as refused:
            Task(**task, **bad)
        assert impossible(refused.value) and "trade_tools.portfolio.MAX_" in str(refused.value), bad
    stored = json.loads(stopped.model_dump_json())
    held = {"SH600519": {"symbol": "SH600519", "shares": 10**15, "sellable": 0, "cost": 1.0}}
    for changed in (
        {**stored, "cash": 1e308},
        {**stored, "task": {**stored["task"], "cash": 1e308}},
        {**stored, "positions": held},
    ):
        with pytest.raises(ValidationError) as refused:
            parse(Episode, json.dumps(changed))
        assert impossible(refused.value)
    with pytest.raises(ValidationError) as shaped:
        parse(Episode, {**stored, "positions": []})
    assert not impossible(shaped.value)  # a record of the wrong shape is not a bad number


def test_no_module_an_episode_is_built_from_holds_the_grading() -> None:
    """What happened after T0 and the score are label data: the Episode, its tools and prompts do not even load
    them (a fresh interpreter imports them; a Trajectory, which carries them, is another module)."""
    imports = "import sys, trade_tools.episode, trade_tools.builtins, trade_tools.prompts; print(*sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", imports],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "trade_tools.episode" in loaded
    assert {GroundTruth.__module__, Reward.__module__} & set(loaded) == set()
