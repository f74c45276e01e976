"""`trade reward list / explain / variance` as a user runs them, checked against in-process scoring on the real data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trade_core.testing import imports_of, run_trade
from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_reward.outcome import outcome
from trade_reward.schemes import get_scheme
from trade_tools.day import TradingDay
from trade_tools.episode import Episode, Task
from trade_tools.trajectory import Trajectory, write_trajectories

DAY = "2024-06-14"
POOL = ["SH600519", "SZ000001", "SH601318"]
TASK = {"task_id": "demo", "date": DAY, "pool": POOL, "holdings": {"SZ000001": 1000}, "cash": 1_000_000.0}
BUY = {"type": "buy", "symbol": "SH600519", "amount": 100}
SELL = {"type": "sell", "symbol": "SZ000001", "amount": 1000}
STOP = {"type": "stop", "reasoning": "done"}


def _played(store: MarketStore, task: dict[str, Any], actions: list[dict[str, Any]]) -> Episode:
    """What `explain` does: one TakeAction per turn of the day."""
    day = TradingDay.start(Task.model_validate(task), store)
    for action in actions:
        day.turn("", [("TakeAction", json.dumps(action))])
    return day.episode


def _write(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _explain(task_file: Path, data: Path, actions: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    run = run_trade(
        "reward",
        "explain",
        "--task",
        str(task_file),
        "--data",
        str(data),
        "--actions",
        json.dumps(actions),
        "--json",
        *extra,
    )
    assert run.code == 0, run.err
    return json.loads(run.out)


def _one_error(*args: str) -> str:
    run = run_trade(*args)
    assert run.code == 2 and "Traceback" not in run.err, run.err
    [line] = run.err.strip().splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.parametrize("args", [(), ("list",), ("explain",), ("variance",)])
def test_every_reward_command_has_help(args: tuple[str, ...]) -> None:
    run = run_trade("reward", *args, "--help")
    assert run.code == 0 and "Usage: trade reward" in run.out, run.err


def test_list_shows_the_built_in_schemes_with_their_settings() -> None:
    run = run_trade("reward", "list", "--json")
    assert run.code == 0, run.err
    schemes = {s["name"]: s for s in json.loads(run.out)}
    assert {"bucketed", "continuous"} <= set(schemes)
    bucketed = schemes["bucketed"]
    assert (bucketed["distribution"], bucketed["plugin"]) == ("trade-reward", "reward")
    assert {s["name"]: s["default"] for s in bucketed["settings"]} == {
        "edges": [-0.02, -0.005, 0.005, 0.02],
        "failure": -3.0,
    }
    text = run_trade("reward", "list").out
    assert "continuous  (trade-reward 0.1.0, plugin reward)" in text and "--set scale=50.0  (float)" in text


@pytest.mark.parametrize("args", [("list",), ("list", "--json")])
def test_listing_the_schemes_imports_no_numpy_or_pandas(args: tuple[str, ...], tmp_path: Path) -> None:
    """A scheme's name, description and settings are declarations: only scoring reads an Episode."""
    assert imports_of("reward", *args, tmp_path=tmp_path) & {"numpy", "pandas"} == set()


def test_explain_plays_the_actions_and_matches_in_process_scoring(
    sample_store: MarketStore, sample_dataset: Path, tmp_path: Path
) -> None:
    actions = [
        BUY,
        SELL,
        {"type": "buy", "symbol": "SH601318", "amount": 1_000_000},
        {"type": "buy", "symbol": "SH600000", "amount": 100},
        {"type": "sel"},
        STOP,
    ]
    task_file = _write(tmp_path / "task.json", TASK)
    report = _explain(task_file, sample_dataset, actions)
    assert [a["result"] for a in report["actions"]] == ["filled", "filled", "refused", "refused", "error", "stop"]
    assert report["actions"][0]["fill"]["shares"] == 100 and report["actions"][0]["fill"]["commission"] > 0
    assert report["actions"][2]["reason"].startswith("现金不足") and "不在股票池中" in report["actions"][3]["reason"]
    assert report["ground_truth_from"] == f"computed from {sample_dataset}"

    episode = _played(sample_store, TASK, actions)
    truth = ground_truth(sample_store, DAY, POOL)
    expected = get_scheme("bucketed").score(outcome(episode, truth))
    assert report["reward"] == expected.model_dump(mode="json")
    v0 = episode.value_before
    returns = [(episode.cash + 100 * truth.close["SH600519"] * g) / v0 - 1 for g in truth.growth["SH600519"]]
    assert report["final"] == {"cash": episode.cash, "holdings": {"SH600519": 100}, "returns": pytest.approx(returns)}
    weighted = sum(w * r for w, r in zip(report["weights"], report["final"]["returns"], strict=True))
    assert report["weights"] == [0.5, 0.3, 0.2] and weighted == pytest.approx(report["reward"]["r_new"])
    assert report["costs_paid"] == pytest.approx(episode.costs_paid()) and report["valid_calls"] == 5

    run = run_trade(
        "reward", "explain", "--task", str(task_file), "--data", str(sample_dataset), "--actions", json.dumps(actions)
    )
    assert run.code == 0, run.err
    for label in ("r_new ", "r_orig ", "r_outcome ", "bucket ", "failure    none", "score ", "refused: 现金不足"):
        assert label in run.out
    assert "weights 0.5/0.3/0.2 over the T+1..T+3 closes" in run.out and "count against the agent" in run.out


@pytest.mark.real_data
def test_explain_uses_the_ground_truth_of_a_tasks_jsonl_line(
    sample_store: MarketStore, sample_dataset: Path, tmp_path: Path
) -> None:
    truth = ground_truth(sample_store, DAY, POOL).model_dump(mode="json")
    truth["growth"]["SH600519"] = [1.2, 1.2, 1.2]  # a made-up future: only the file's truth can produce it
    other = {**TASK, "task_id": "other", "date": "2023-03-01"}
    tasks = _write(
        tmp_path / "val.jsonl",
        {"index": 0, "split": "val", "task": other},
        {"index": 1, "split": "val", "task": TASK, "ground_truth": json.dumps(truth)},
    )
    report = _explain(tasks, sample_dataset, [BUY, STOP], "--index", "1", "--scheme", "continuous")
    assert report["ground_truth_from"] == "from the task file" and report["task"]["task_id"] == "demo"
    maotai = 100 * truth["close"]["SH600519"] * 0.2 / report["value_before"]  # about +3% of V0
    assert report["final"]["returns"][0] - report["original"]["returns"][0] > maotai - 0.001
    assert report["reward"]["score"] == 1.0  # 50 x 3% clipped to 1


@pytest.mark.real_data
def test_explain_failures_and_settings(sample_store: MarketStore, sample_dataset: Path, tmp_path: Path) -> None:
    task_file = _write(tmp_path / "task.json", TASK)
    no_stop = _explain(task_file, sample_dataset, [BUY])["reward"]
    assert (no_stop["failure"], no_stop["score"], no_stop["bucket"]) == ("no_stop", -3.0, None)
    nothing = _explain(task_file, sample_dataset, [], "--scheme", "continuous", "--set", "failure=-2")["reward"]
    assert (nothing["failure"], nothing["score"]) == ("no_valid_call", -2.0)
    scaled = _explain(task_file, sample_dataset, [SELL, STOP], "--scheme", "continuous", "--set", "scale=25")["reward"]
    assert scaled["score"] == pytest.approx(25 * scaled["r_outcome"]) and scaled["failure"] is None
    edges = _explain(task_file, sample_dataset, [BUY, STOP], "--set", "edges=[-0.001,-0.0005,0.0005,0.001]")["reward"]
    assert edges["r_outcome"] < -0.001 and edges["bucket"] == -2


def test_explain_errors_are_one_line(sample_dataset: Path, tmp_path: Path) -> None:
    task_file = _write(tmp_path / "task.json", TASK)
    base = ("reward", "explain", "--data", str(sample_dataset))
    ok = ("--task", str(task_file), "--actions", "[]")
    assert _one_error(*base, *ok, "--scheme", "nope") == (
        "error: unknown reward scheme 'nope' (valid: bucketed, continuous)"
    )
    assert "--actions is not JSON" in _one_error(*base, "--task", str(task_file), "--actions", "[{")
    assert "--actions must be a JSON list of objects" in _one_error(*base, "--task", str(task_file), "--actions", "{}")
    assert "no such task file" in _one_error(*base, "--task", str(tmp_path / "none.json"), "--actions", "[]")
    wrong = _write(tmp_path / "wrong.json", {"task_id": "x", "date": DAY, "cash": 1})
    assert "not a task (pool: Field required)" in _one_error(*base, "--task", str(wrong), "--actions", "[]")
    two = _write(tmp_path / "two.jsonl", TASK, TASK)
    assert "pick one with --index N" in _one_error(*base, "--task", str(two), "--actions", "[]")
    assert "--index 2 is out of range" in _one_error(*base, "--task", str(two), "--index", "2", "--actions", "[]")
    holiday = _write(tmp_path / "holiday.json", {**TASK, "date": "2024-06-15"})
    assert "2024-06-15 is not a trading day" in _one_error(*base, "--task", str(holiday), "--actions", "[]")
    assert "is not KEY=VALUE" in _one_error(*base, *ok, "--set", "scale")
    assert "bad settings for reward scheme 'continuous'" in _one_error(
        *base, *ok, "--scheme", "continuous", "--set", "scale=-1"
    )


SCRIPTS = {  # task -> one script per trajectory of its GRPO group
    "a": (DAY, [[STOP], [BUY, STOP], [SELL, STOP], []]),
    "b": ("2023-03-01", [[STOP], [STOP], [STOP]]),  # identical: zero variance under every scheme
    "c": ("2021-09-10", [[STOP], [{"type": "buy", "symbol": "SH601318", "amount": 100}, STOP]]),  # |r| tiny
}


@pytest.fixture
def rollouts(sample_store: MarketStore, tmp_path: Path) -> tuple[Path, list[Trajectory]]:
    """Trajectories of three tasks on the real data; only task a's store their ground truth."""
    trajectories = []
    for task_id, (day, scripts) in SCRIPTS.items():
        task = {**TASK, "task_id": task_id, "date": day}
        for script in scripts:
            episode = _played(sample_store, task, script)
            truth = ground_truth(sample_store, day, POOL) if task_id == "a" else None
            trajectories.append(
                Trajectory(task_id=task_id, source="test", episode=episode, messages=[], ground_truth=truth)
            )
    return write_trajectories(tmp_path / "rollouts.jsonl", trajectories), trajectories


@pytest.mark.parametrize(("scheme", "zero"), [("bucketed", ["b", "c"]), ("continuous", ["b"])])
def test_variance_counts_groups_whose_scores_are_all_equal(
    sample_store: MarketStore,
    sample_dataset: Path,
    rollouts: tuple[Path, list[Trajectory]],
    scheme: str,
    zero: list[str],
) -> None:
    path, trajectories = rollouts
    run = run_trade("reward", "variance", str(path), "--data", str(sample_dataset), "--scheme", scheme, "--json")
    assert run.code == 0, run.err
    report = json.loads(run.out)
    expected: dict[str, list[float]] = {}
    for t in trajectories:
        truth = ground_truth(sample_store, t.episode.task.date, POOL)
        expected.setdefault(t.task_id, []).append(get_scheme(scheme).score(outcome(t.episode, truth)).score)
    assert {g["key"]: g["scores"] for g in report["per_group"]} == expected
    assert [g["key"] for g in report["per_group"] if g["zero_variance"]] == zero
    assert (report["trajectories"], report["groups"], report["zero_variance_groups"]) == (9, 3, len(zero))
    assert report["zero_variance_share"] == pytest.approx(len(zero) / 3)
    assert report["group_sizes"] == [[2, 1], [3, 1], [4, 1]]
    assert report["failures"] == {"no_valid_call": 1} and report["ground_truth_from"] == {"trajectory": 4, "data": 5}
    assert "task_id" in report["convention"] and "GRPO" in report["convention"]

    text = run_trade("reward", "variance", str(path), "--data", str(sample_dataset), "--scheme", scheme).out
    assert f"zero-variance groups: {len(zero)}/3 ({len(zero) / 3:.1%}) have all scores equal" in text
    assert "9 trajectories in 3 groups by task_id" in text and "group sizes: 2 x 1 group, 3 x 1 group" in text


def test_variance_by_date_and_its_errors(
    sample_dataset: Path, rollouts: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    path, _ = rollouts
    run = run_trade("reward", "variance", str(path), "--data", str(sample_dataset), "--by", "date", "--json")
    assert [g["key"] for g in json.loads(run.out)["per_group"]] == ["2021-09-10", "2023-03-01", DAY]
    assert "has no ground_truth (pass --data DIR" in _one_error("reward", "variance", str(path))
    assert "no such trajectory file" in _one_error("reward", "variance", str(tmp_path / "none.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().splitlines()[0] + "\n{}\n")
    assert f"{bad}:2: not a trajectory" in _one_error("reward", "variance", str(bad), "--data", str(sample_dataset))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert "no trajectories" in _one_error("reward", "variance", str(empty))


def test_variance_reads_version_1_records(
    sample_dataset: Path, rollouts: tuple[Path, list[Trajectory]], tmp_path: Path
) -> None:
    """Version 1 kept the ground truth as JSON text inside the untyped reward, as verl training wrote it."""
    path, trajectories = rollouts
    old = tmp_path / "v1.jsonl"
    lines = []
    for t in trajectories:
        record = json.loads(t.model_dump_json(exclude={"step", "ground_truth"}))
        flat = {
            "score": -3.0,
            "scheme": "bucketed",
            "r_new": 0.0,
            "r_orig": 0.0,
            "r_outcome": 0.0,
            "bucket": -99,
            "penalty": 0.0,
            "failure": "no_valid_call",
            "step": 4,
        }
        if t.ground_truth is not None:
            flat["ground_truth"] = t.ground_truth.model_dump_json()
        lines.append(json.dumps({**record, "version": 1, "reward": flat}))
    old.write_text("\n".join(lines) + "\n")
    refused = run_trade("reward", "variance", str(old))  # tasks b and c store none: --data computes theirs
    assert refused.code == 2 and "trajectory 5 " in refused.err and "has no ground_truth" in refused.err
    data = ["--data", str(sample_dataset), "--json"]
    before = json.loads(run_trade("reward", "variance", str(path), *data).out)
    after = run_trade("reward", "variance", str(old), *data)
    assert after.code == 0, after.err
    assert {**json.loads(after.out), "file": ""} == {**before, "file": ""}


def test_explain_truncates_after_the_last_allowed_turn_as_training_does(sample_store: MarketStore) -> None:
    from trade_reward.commands.explain import play
    from trade_tools.episode import EpisodeSettings

    episode = Episode.start(Task.model_validate(TASK), sample_store, settings=EpisodeSettings(max_turns=2))
    play(episode, [BUY, BUY])
    assert episode.status == "truncated" and episode.turns == 2
