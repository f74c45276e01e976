"""`trade eval tasks` on a tasks folder built by the real `trade data tasks` code on the real data."""

from __future__ import annotations

import gc
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from trade_core.errors import TradeError
from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_eval.policy import POLICIES, DayUsage, Policy, RunSettings
from trade_eval.single_day import YOUNG_GENERATION, TasksEval, load_tasks, new_manifest, run_tasks
from trade_eval.testing import LOOP, STOP, Fail, FaultServer, Reply, Request
from trade_records.runfolder import EPISODES, MANIFEST, SUMMARY, TRAJECTORIES, TasksSummary
from trade_reward.commands.explain import breakdown, play
from trade_reward.schemes import get_scheme
from trade_reward.taskbuilder import build_tasks
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.trajectory import Trajectory

SPLIT = "test=2025-07-01:2025-07-14"


@pytest.fixture(scope="module")
def tasks_folder(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tasks a day over a few days of July 2025."""
    out = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(sample_dataset, out, split=SPLIT, pool_size="8", per_day=2, seed=3)
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _run(
    tasks: Path,
    sample_store: MarketStore,
    out: Path,
    policy: str | Policy,
    servers: tuple[str, ...] = (),
    samples: int = 1,
    concurrency: int = 8,
    limit: int | None = None,
    resume: bool = False,
    workers: int = 1,
) -> TasksSummary:
    records, split, _ = load_tasks(tasks, "test")
    evaluation = TasksEval(sample_store, records[:limit], [get_scheme("bucketed"), get_scheme("continuous")], samples)
    settings = RunSettings(model="m", retries=1, request_timeout=5, options={"backoff": 0})
    policy = POLICIES.get(policy) if isinstance(policy, str) else policy
    manifest = new_manifest(
        evaluation, policy.name, settings, command=[], tasks=tasks, split=split, servers=servers, data=sample_store.path
    )
    return run_tasks(
        evaluation,
        policy,
        settings,
        out,
        manifest,
        servers=servers,
        concurrency=concurrency,
        workers=workers,
        resume=resume,
        progress=False,
    )


def test_a_baseline_run_scores_what_trade_reward_explain_scores(
    tasks_folder: Path, sample_dataset: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """Through the CLI: each episode's reward (both schemes) equals replaying its orders the way `trade reward
    explain` does, on a fresh Episode scored with the task file's ground truth."""
    out = tmp_path / "run"
    args = [
        "eval",
        "tasks",
        "--tasks",
        str(tasks_folder / "test.jsonl"),
        "--policy",
        "equal-weight",
        "--scheme",
        "bucketed",
        "--scheme",
        "continuous",
        "--data",
        str(sample_dataset),
        "--out",
        str(out),
    ]
    done = run_trade(*args)
    assert done.code == 0, done.err
    records = {r.task.task_id: r for r in load_tasks(tasks_folder / "test.jsonl", None)[0]}
    episodes = {e["trajectory_id"]: e for e in _lines(out / EPISODES)}
    assert len(episodes) == len(records) >= 6
    traded = 0
    for line in _lines(out / TRAJECTORIES):
        trajectory = Trajectory.model_validate(line)
        record = records[trajectory.task_id]
        assert trajectory.ground_truth == record.ground_truth
        calls = [c.function for m in trajectory.messages for c in m.tool_calls or []]
        orders = [json.loads(c.arguments) for c in calls if c.name == "TakeAction"]
        traded += len(orders) > 1
        fresh = Episode.start(record.task, sample_store)
        steps = play(fresh, orders)
        for name in ("bucketed", "continuous"):
            direct = breakdown(fresh, steps, record.ground_truth, "task file", get_scheme(name))["reward"]
            assert episodes[trajectory.id]["rewards"][name] == direct
        assert trajectory.reward.model_dump(mode="json") == episodes[trajectory.id]["rewards"]["bucketed"]
    assert traded  # the baseline bought something on some day
    summary = json.loads((out / SUMMARY).read_text())
    scores = [e["rewards"]["continuous"]["score"] for e in episodes.values()]
    assert summary["mean_reward"]["continuous"] == pytest.approx(sum(scores) / len(scores))
    assert summary["stop_rate"] == 1.0 and summary["failed"] == 0
    low, high = summary["mean_reward_ci"]["continuous"]
    assert low <= summary["mean_reward"]["continuous"] <= high
    assert f"mean reward continuous: {summary['mean_reward']['continuous']:+.4f} [{low:+.4f}, {high:+.4f}]" in done.out
    assert "stop rate 100.0% [100.0%, 100.0%]" in done.out
    assert f"intervals: {summary['interval_method']}" in done.out


def test_llm_episodes_over_two_faulty_servers_are_all_accounted_for(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """Concurrency 8 over two servers: one task's server keeps failing (a failed episode with its reason), one
    loops until truncated, one replies without a call; every episode is recorded and both servers served."""
    records, _, _ = load_tasks(tasks_folder, "test")
    down, looping, silent = (r.task.date.isoformat() for r in records[0:6:2])

    def script(request: Request) -> Fail | Reply:
        if request.date == down:
            return Fail(503, "overloaded")
        if request.date == looping:
            return LOOP
        return (
            Reply(content="不交易", delay=0.05)
            if request.date == silent
            else Reply(STOP.content, STOP.calls, delay=0.05)
        )

    with FaultServer(script) as one, FaultServer(script) as two:
        summary = _run(tasks_folder, sample_store, tmp_path / "run", "llm", (one.url, two.url), samples=2)
        served = (len(one.requests), len(two.requests))
    episodes = _lines(tmp_path / "run" / EPISODES)
    assert Counter((e["task_id"], e["sample"]) for e in episodes) == Counter(
        (r.task.task_id, n) for r in records for n in range(2)
    )
    assert min(served) > 0.3 * sum(served)
    assert summary.servers == dict(Counter(e["server"] for e in episodes)) and len(summary.servers) == 2
    failed = [e for e in episodes if e["status"] == "failed"]
    assert {e["date"] for e in failed} == {down} and len(failed) == 2 * sum(
        r.task.date.isoformat() == down for r in records
    )
    assert "HTTP 503 (overloaded) after 2 attempts" in failed[0]["reason"] and not failed[0]["rewards"]
    reasons = summary.failure_reasons
    assert reasons["truncated"] == reasons["no_valid_call"] == len(failed)  # two tasks a day, two samples each
    assert sum(reasons.values()) == 3 * len(failed) and summary.episodes == len(episodes)
    assert summary.mean_reward["bucketed"] is not None and summary.tool_error_rate == 0.0


def test_resume_skips_the_finished_episodes(tasks_folder: Path, sample_store: MarketStore, tmp_path: Path) -> None:
    """A run cut short (its last line half written, a trajectory without its record) resumes with only the
    episodes it lacks; other settings are refused."""
    out = tmp_path / "run"
    with FaultServer(default=STOP) as server:
        _run(tasks_folder, sample_store, out, "llm", (server.url,), limit=3)
        first = len(server.requests)
    with open(out / EPISODES, "rb+") as handle:  # the last record half written
        handle.truncate(handle.seek(0, 2) - 40)
    with FaultServer(default=STOP) as server:
        summary = _run(tasks_folder, sample_store, out, "llm", (server.url,), limit=3, resume=True)
        again = len(server.requests)
    assert first == 3 and again == 1
    episodes = _lines(out / EPISODES)
    assert summary.episodes == len(episodes) == 3 and len({e["task_id"] for e in episodes}) == 3
    assert [t["id"] for t in _lines(out / TRAJECTORIES)] == [e["trajectory_id"] for e in episodes]
    with pytest.raises(TradeError, match=r"other settings \(tasks differ\)"):
        _run(tasks_folder, sample_store, out, "llm", (server.url,), limit=4, resume=True)
    assert json.loads((out / MANIFEST).read_text())["tasks"]["count"] == 3


def test_a_resume_while_the_run_is_written_is_refused(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path, lock_holder
) -> None:
    """A second writer appended its episodes among the first's: 87 lines for 64 episodes."""
    out = tmp_path / "run"
    _run(tasks_folder, sample_store, out, "momentum", limit=2)
    before = (out / EPISODES).read_bytes()
    with lock_holder(out) as holder, pytest.raises(TradeError, match=f"being written by process {holder.pid} "):
        _run(tasks_folder, sample_store, out, "momentum", limit=3, resume=True)
    assert (out / EPISODES).read_bytes() == before
    assert _run(tasks_folder, sample_store, out, "momentum", limit=2, resume=True).episodes == 2


def test_the_episodes_of_a_run_share_their_connections(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """One client per server for the whole run: a client per episode opened a connection per episode, CPU
    that dominated the harness with hundreds of episodes in flight."""
    with FaultServer([LOOP] * 6) as server:
        summary = _run(tasks_folder, sample_store, tmp_path / "run", "llm", (server.url,), concurrency=2, limit=6)
    assert summary.played == 6 and len(server.requests) == 12
    assert server.connections <= 2


class _HeapWatcher(Policy):
    """Ends each day at once, noting how many objects the garbage collector leaves out of its collections."""

    name = "heap-watcher"
    description = "test policy"
    reads_prompt = False

    def __init__(self) -> None:
        self.frozen: list[int] = []
        self.thresholds: list[tuple[int, ...]] = []

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        self.frozen.append(gc.get_freeze_count())
        self.thresholds.append(gc.get_threshold())
        day.turn("", [])
        return DayUsage()


def test_the_episodes_play_with_what_was_alive_before_them_out_of_the_collectors_way(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """Full collections rescanned the store, the tasks and every import once per few episodes (a tenth of the
    harness's CPU an episode); the heap is frozen while the episodes play and thawed after, and the young
    generation collected less often meanwhile (most of it is alive with hundreds of episodes in flight)."""
    policy = _HeapWatcher()
    threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    assert _run(tasks_folder, sample_store, tmp_path / "run", policy, limit=3).played == 3
    assert len(policy.frozen) == 3 and min(policy.frozen) > len(load_tasks(tasks_folder, "test")[0])
    assert policy.thresholds == [(max(threshold[0], YOUNG_GENERATION), *threshold[1:])] * 3
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def _played(out: Path) -> dict[tuple[str, int], tuple[dict, dict]]:
    """Each (task, sample)'s record and trajectory, without what differs between any two runs (the trajectory's
    random id and time, the latency)."""
    trajectories = {t.pop("id"): {**t, "created_at": None} for t in _lines(out / TRAJECTORIES)}
    return {
        (e["task_id"], e["sample"]): ({**e, "latency_s": None, "trajectory_id": None}, trajectories[e["trajectory_id"]])
        for e in _lines(out / EPISODES)
    }


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_play_the_same_episodes_and_one_process_writes_them(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path, workers: int
) -> None:
    """`--workers N`: the episodes are shared among N processes with their own event loops; the run folder holds
    what one process writes (every record after its trajectory, each line whole) and the same scores."""
    with FaultServer(default=STOP) as server:
        one = _run(tasks_folder, sample_store, tmp_path / "one", "llm", (server.url,), samples=2)
        many = _run(tasks_folder, sample_store, tmp_path / "many", "llm", (server.url,), samples=2, workers=workers)
    assert _played(tmp_path / "many") == _played(tmp_path / "one") and len(_played(tmp_path / "one")) > 8
    assert many.mean_reward == one.mean_reward and many.played == one.played
    baseline = [_run(tasks_folder, sample_store, tmp_path / f"m{n}", "momentum", workers=n) for n in (1, workers)]
    assert baseline[0].mean_reward == baseline[1].mean_reward


class _DiesInAWorker(_HeapWatcher):
    """Ends the day at once; in a worker process, the episode of task ``fatal`` kills the process."""

    name = "dies-in-a-worker"

    def __init__(self, fatal: str | None) -> None:
        super().__init__()
        self.parent, self.fatal = os.getpid(), fatal

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        if os.getpid() != self.parent and day.episode.task.task_id == self.fatal:
            os._exit(3)
        return await super().play(day, settings)


def test_a_worker_that_dies_stops_the_run_in_one_line_and_a_resume_plays_the_rest(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    records, out = load_tasks(tasks_folder, "test")[0], tmp_path / "run"
    policy = _DiesInAWorker(fatal=records[4].task.task_id)
    with pytest.raises(TradeError, match=r"an evaluation worker died \(exit code 3\)"):
        _run(tasks_folder, sample_store, out, policy, workers=2)
    written = _lines(out / EPISODES)
    assert 0 < len(written) < len(records)
    policy.fatal = None
    summary = _run(tasks_folder, sample_store, out, policy, resume=True)
    assert summary.played == len(records) == len({e["task_id"] for e in _lines(out / EPISODES)})


def test_llm_needs_a_server_and_a_folder_needs_a_split(tasks_folder: Path) -> None:
    done = run_trade("eval", "tasks", "--tasks", str(tasks_folder), "--model", "m", "--base-url", "http://x/v1")
    assert done.code == 2 and "is a tasks folder: --split is required (its splits: test)" in done.err


def test_every_server_is_checked_first_and_a_run_that_played_nothing_exits_non_zero(
    tasks_folder: Path, tmp_path: Path
) -> None:
    args = ["eval", "tasks", "--tasks", str(tasks_folder), "--split", "test", "--model", "m", "--limit", "2"]
    with FaultServer(default=Fail(503)) as server:
        down = run_trade(*args, "--base-url", server.url, "--base-url", "http://127.0.0.1:0/v1", cwd=tmp_path)
        assert down.code == 2 and down.err.startswith("error: no server answers at http://127.0.0.1:0/v1 (")
        assert not (tmp_path / "runs").exists()
        out = tmp_path / "run"
        failed = run_trade(*args, "--base-url", server.url, "--retries", "0", "--out", str(out))
    assert failed.code == 2 and failed.err.strip().splitlines()[-1].startswith(f"error: all 2 episodes of {out} failed")
    assert "2 episodes: 0 played, 2 failed (server)" in failed.out and len(_lines(out / EPISODES)) == 2


def test_the_cli_plays_with_workers(tasks_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", "tasks", "--tasks", str(tasks_folder), "--split", "test", "--policy", "momentum", "--limit", "4"]
    done = run_trade(*args, "--workers", "2", "--out", str(out))
    assert done.code == 0, done.err
    assert "4 episodes: 4 played, 0 failed (server)" in done.out and len(_lines(out / EPISODES)) == 4
    refused = run_trade(*args, "--workers", "0", "--out", str(tmp_path / "none"))
    assert refused.code == 2 and "--workers" in refused.err


def test_workers_refuse_a_policy_whose_model_lives_in_this_process(
    tasks_folder: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """A fork copies neither the local policy's batching thread nor a GPU context: refused before anything is
    written (or any model loaded, on the command line)."""
    with pytest.raises(TradeError, match="policy 'local' runs its model in this process"):
        _run(tasks_folder, sample_store, tmp_path / "run", "local", workers=2)
    assert not (tmp_path / "run").exists()
    args = ["eval", "tasks", "--tasks", str(tasks_folder), "--split", "test", "--policy", "local", "--workers", "2"]
    refused = run_trade(*args, "--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "cli"))
    assert refused.code == 2 and "runs its model in this process" in refused.err.splitlines()[-1], refused.err
