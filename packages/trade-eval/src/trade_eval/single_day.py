"""Single-day evaluation at scale: every task of a tasks folder (``trade data tasks``) is an independent episode.

A task is played as training plays it: the record's own prompt and task on a fresh Episode, scored with the
record's ground truth through trade-reward's schemes (:func:`trade_reward.outcome.outcome`, a malformed input
scoring ``malformed`` as verl's ``compute_score`` does). Episodes need nothing from each other, so many are in
flight at once (``concurrency``) and each talks to the least busy server. A server failure after the policy's
retries fails that episode with its reason; the run goes on.

The run folder (:mod:`trade_records.runfolder`) holds ``manifest.json``, ``trajectories.jsonl`` (trade-tools
Trajectories with ground truth and reward), ``episodes.jsonl`` (one :class:`EpisodeRecord` per finished episode,
appended after its trajectory, in the order episodes finish) and ``summary.json``. ``--resume`` skips the
(task, sample) pairs already recorded.

Episodes are independent to play but not as observations: the tasks of one T0 day share the market of its next
three days, and consecutive T0 days overlap in those reward windows. So every mean in summary.json carries an
interval that resamples T0 days in blocks of consecutive days, each with all its tasks and samples
(:class:`trade_eval.uncertainty.Clusters`).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import itertools
import statistics
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from trade_core import runs
from trade_core.errors import TradeError, error_line
from trade_core.files import Appender
from trade_core.plugins import TradePluginManager, get_manager
from trade_data.store import MarketStore
from trade_eval.policies.llm import shared_clients
from trade_eval.policy import Policy, RunSettings
from trade_eval.run import manifest_fields, play_day
from trade_eval.uncertainty import Bootstrap, Clusters
from trade_records.runfolder import (
    EPISODES,
    SUMMARY,
    TRAJECTORIES,
    EpisodeRecord,
    TasksManifest,
    TasksRef,
    TasksSummary,
    open_run,
    write_json,
    writer_lock,
)
from trade_reward.outcome import DEFAULT_WEIGHTS, MALFORMED, Outcome, outcome
from trade_reward.schemes import RewardScheme
from trade_reward.taskfolder import MANIFEST as TASKS_MANIFEST
from trade_reward.taskfolder import TaskRecord, read_manifest, read_records
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.exploit import Exploit, exploit
from trade_tools.grading import Reward
from trade_tools.trajectory import Trajectory

log = structlog.get_logger("trade.eval.tasks")

SOURCE = "eval-tasks"


def load_tasks(path: Path, split: str | None) -> tuple[list[TaskRecord], str, Path | None]:
    """The records of a tasks folder's ``split`` or of a task JSONL file, the split's name, and the dataset
    the folder's manifest names (None when there is no manifest beside a file)."""
    path = Path(path)
    if path.is_dir():
        manifest = read_manifest(path)
        names = [s.name for s in manifest.splits]
        if split not in names:
            problem = "is a tasks folder: --split is required" if split is None else f"has no split {split!r}"
            raise TradeError(f"{path} {problem}", hint=f"its splits: {', '.join(names)}")
        return read_records(path, split), split, manifest.dataset_in(path)
    if not path.is_file():
        raise TradeError(f"--tasks {path}: no such folder or file", hint="a `trade data tasks` folder or its .jsonl")
    dataset = read_manifest(path.parent).dataset_in(path.parent) if (path.parent / TASKS_MANIFEST).is_file() else None
    return read_records(path.parent, path.stem), path.stem, dataset


def tasks_fingerprint(records: Sequence[TaskRecord]) -> str:
    return hashlib.sha256("\n".join(r.task.task_id for r in records).encode()).hexdigest()[:16]


def score(episode: Episode, record: TaskRecord, schemes: Sequence[RewardScheme]) -> dict[str, Reward]:
    """The episode's reward under each scheme, as training computes it from the record's ground truth."""
    try:
        result = outcome(episode, record.ground_truth, DEFAULT_WEIGHTS)
    except TradeError as refused:
        log.warning("tasks.reward_input_refused", task=record.task.task_id, error=error_line(refused))
        result = Outcome.unscorable(MALFORMED, episode)
    return {scheme.name: scheme.score(result) for scheme in schemes}


class Servers:
    """Each episode talks to the server with the fewest episodes in flight (ties in turn)."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.busy = dict.fromkeys(urls, 0)
        self.turn = itertools.count()

    @contextmanager
    def lease(self) -> Iterator[str | None]:
        if not self.busy:
            yield None
            return
        urls = list(self.busy)
        start = next(self.turn) % len(urls)
        url = min(urls[start:] + urls[:start], key=self.busy.__getitem__)
        self.busy[url] += 1
        try:
            yield url
        finally:
            self.busy[url] -= 1


def anonymized(record: TaskRecord, store: MarketStore) -> TaskRecord:
    """The record with its task anonymized and the prompt an anonymized episode renders for it."""
    if record.task.anonymized:
        return record
    task = record.task.model_copy(update={"anonymized": True})
    return record.model_copy(update={"task": task, "prompt": Episode.start(task, store).messages()})


class TasksEval:
    """The tasks, the dataset and the schemes of one run; plays any policy over them."""

    def __init__(
        self,
        store: MarketStore,
        records: Sequence[TaskRecord],
        schemes: Sequence[RewardScheme],
        samples: int = 1,
        *,
        anonymize: bool = False,
        anonymize_noise: float | None = None,
        manager: TradePluginManager | None = None,
    ) -> None:
        """``anonymize``: play plain tasks anonymized, their prompts rendered again with aliases (a folder
        built with ``--anonymize`` already is); ``anonymize_noise``: their bars perturbed so (``Task.
        anonymize_noise``), which only anonymized tasks show; ``manager``: the plugins each Episode and the run's
        end are played with (default: the process-wide ones)."""
        if not schemes:
            raise TradeError("no reward scheme to score with", hint="pass --scheme bucketed")
        self.store = store
        self.manager = manager or get_manager()
        self.records = [anonymized(record, store) for record in records] if anonymize else list(records)
        if anonymize_noise is not None:
            if not all(record.task.anonymized for record in self.records):
                raise TradeError("--anonymize-noise perturbs what anonymized tasks show", hint="add --anonymize")
            noise = {"anonymize_noise": anonymize_noise}
            self.records = [r.model_copy(update={"task": r.task.model_copy(update=noise)}) for r in self.records]
        self.schemes = list(schemes)
        self.samples = samples

    @property
    def anonymized(self) -> bool:
        return any(record.task.anonymized for record in self.records)

    def pending(self, done: Sequence[EpisodeRecord] = ()) -> list[tuple[TaskRecord, int]]:
        finished = {(r.task_id, r.sample) for r in done}
        pairs = itertools.product(self.records, range(self.samples))
        return [(record, n) for record, n in pairs if (record.task.task_id, n) not in finished]

    async def play(
        self, policy: Policy, settings: RunSettings, record: TaskRecord, sample: int, server: str | None
    ) -> tuple[EpisodeRecord, Trajectory]:
        """Play one task as one episode (sample ``sample`` seeds the sampling apart) and score it."""
        episode = Episode.start(record.task, self.store, manager=self.manager)
        day = TradingDay(episode, record.prompt if policy.reads_prompt else [])
        run = settings.model_copy(update={"base_url": server, "seed": settings.seed + sample})
        usage, failure = await play_day(policy, day, run, "tasks.policy_error", task=record.task.task_id)
        rewards = {} if failure else score(episode, record, self.schemes)
        signal = self.store.planted_signal
        bought = (
            exploit(episode, episode.view, signal)
            if signal
            else Exploit(sum(a.accepted and a.type == "buy" for a in episode.actions))
        )
        first = rewards.get(self.schemes[0].name)
        trajectory = day.to_trajectory(SOURCE, model=settings.model, ground_truth=record.ground_truth, reward=first)
        result = EpisodeRecord(
            task_id=record.task.task_id,
            sample=sample,
            date=record.task.date,
            status="failed" if failure else "done",
            episode_status=episode.status,
            reason=failure or ("" if episode.status == "stopped" else episode.status_reason),
            server=server,
            rewards=rewards,
            buys=bought.buys,
            top_buys=bought.top if signal else None,
            trajectory_id=trajectory.id,
            **usage.model_dump(),
        )
        return result, trajectory

    async def episodes(
        self,
        policy: Policy,
        settings: RunSettings,
        pending: Sequence[tuple[TaskRecord, int]],
        servers: Sequence[str] = (),
        concurrency: int = 64,
    ) -> AsyncIterator[tuple[EpisodeRecord, Trajectory]]:
        """Play ``pending`` with at most ``concurrency`` in flight; yields each as it finishes."""
        gate, pool = asyncio.Semaphore(concurrency), Servers(servers)

        async def one(record: TaskRecord, sample: int) -> tuple[EpisodeRecord, Trajectory]:
            async with gate:
                with pool.lease() as url:
                    return await self.play(policy, settings, record, sample, url)

        running = [asyncio.ensure_future(one(record, sample)) for record, sample in pending]
        try:
            for finished in asyncio.as_completed(running):
                yield await finished
        finally:
            for task in running:
                task.cancel()


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


INTERVALS = Bootstrap()
"""Stationary bootstrap over T0 days (:class:`Clusters`): tasks of a day, and of neighbouring days, share markets."""


def summarize(
    records: Sequence[EpisodeRecord], schemes: Sequence[str], bootstrap: Bootstrap = INTERVALS
) -> TasksSummary:
    """summary.json: rewards over the episodes the policy played (a failed one has no reward), the rest over
    every episode. Failure reasons: the first scheme's failure of a played episode, or the server's. The
    rates and mean rewards carry ``<key>_ci``, an interval resampling T0 days in blocks of consecutive days, each
    with all its tasks and samples (:class:`Clusters`)."""
    played = [r for r in records if r.status == "done"]
    calls = sum(r.tool_calls for r in records)
    reasons = Counter(
        r.rewards[schemes[0]].failure if r.status == "done" else f"unavailable: {r.reason}" for r in records
    )
    reasons.pop(None, None)
    rewards = {name: [r.rewards[name].score for r in played] for name in schemes}
    stopped = [float(r.episode_status == "stopped") for r in played]
    clusters = Clusters([r.date for r in played], bootstrap)
    every = Clusters([r.date for r in records], bootstrap)
    exploited = all(r.top_buys is not None for r in records) and sum(r.buys for r in records) > 0
    top, buys = [r.top_buys or 0 for r in records], [r.buys for r in records]
    fields = {
        "episodes": len(records),
        "played": len(played),
        "failed": len(records) - len(played),
        "mean_reward": {name: _mean(values) for name, values in rewards.items()},
        "mean_reward_ci": {name: clusters.mean(values) for name, values in rewards.items()},
        "stop_rate": _mean(stopped),
        "stop_rate_ci": clusters.mean(stopped),
        "tool_error_rate": sum(r.tool_errors for r in records) / calls if calls else None,
        "tool_error_rate_ci": every.ratio([r.tool_errors for r in records], [r.tool_calls for r in records]),
        "buys_per_episode": _mean([r.buys for r in records]),
        "exploit_share": sum(top) / sum(buys) if exploited else None,
        "exploit_share_ci": every.ratio(top, buys) if exploited else None,
        "interval_method": every.describe(),
        "failure_reasons": dict(reasons.most_common()),
        "turns_per_episode": _mean([r.turns for r in records]),
        "prompt_tokens_per_episode": _mean([r.prompt_tokens for r in records]),
        "completion_tokens_per_episode": _mean([r.completion_tokens for r in records]),
        "requests": sum(r.requests for r in records),
        "retries": sum(r.retries for r in records),
        "servers": dict(Counter(r.server for r in records if r.server)),
    }
    return TasksSummary.model_validate(fields)


def summary_lines(summary: TasksSummary) -> list[str]:
    """The summary as the CLI prints it: each mean with its interval, and the intervals' method."""

    def show(value: float | None, form: str) -> str:
        return "-" if value is None else format(value, form)

    def ranged(value: float | None, interval: list[float] | None, form: str) -> str:
        return f"{show(value, form)} " + (
            "[-]" if interval is None else f"[{interval[0]:{form}}, {interval[1]:{form}}]"
        )

    lines = [f"{summary.episodes} episodes: {summary.played} played, {summary.failed} failed (server)"]
    lines += [
        f"mean reward {name}: {ranged(v, summary.mean_reward_ci[name], '+.4f')}"
        for name, v in summary.mean_reward.items()
    ]
    lines += [
        f"stop rate {ranged(summary.stop_rate, summary.stop_rate_ci, '.1%')}  tool-error rate "
        f"{ranged(summary.tool_error_rate, summary.tool_error_rate_ci, '.1%')}",
        f"intervals: {summary.interval_method}",
        f"per episode: turns {show(summary.turns_per_episode, '.2f')}, prompt tokens "
        f"{show(summary.prompt_tokens_per_episode, ',.0f')}, completion tokens "
        f"{show(summary.completion_tokens_per_episode, ',.0f')}",
    ]
    if summary.exploit_share is not None:
        share = ranged(summary.exploit_share, summary.exploit_share_ci, ".1%")
        lines.insert(
            -2,
            f"exploit share {share}: of {show(summary.buys_per_episode, '.2f')} buys an episode, "
            "those of the pool's top stock by the planted signal",
        )
    lines += [f"failure {reason}: {count}" for reason, count in summary.failure_reasons.items()]
    return lines


def run_tasks(
    evaluation: TasksEval,
    policy: Policy,
    settings: RunSettings,
    out: Path,
    manifest: TasksManifest,
    *,
    servers: Sequence[str] = (),
    concurrency: int = 64,
    workers: int = 1,
    resume: bool = False,
    progress: bool = True,
) -> TasksSummary:
    """Play every (task, sample) not yet in ``out`` and write summary.json; returns it. ``workers`` > 1 plays
    them in that many processes (:func:`in_workers`), this one alone writing the folder."""
    out = Path(out)
    check_workers(policy, workers)
    with runs.running("tasks", out, evaluation.manager), writer_lock(out):
        records = open_run(out, manifest, resume=resume)
        play_into(evaluation, policy, settings, out, records, servers, concurrency, progress, workers)
        summary = summarize(records, [s.name for s in evaluation.schemes])
        write_json(out / SUMMARY, summary)
    return summary


def check_workers(policy: Policy, workers: int) -> None:
    """Refuse ``workers`` > 1 for a policy forked workers cannot play (:attr:`Policy.plays_in_workers`)."""
    if workers > 1 and not policy.plays_in_workers:
        raise TradeError(
            f"policy {policy.name!r} runs its model in this process: worker processes cannot play it",
            hint="drop --workers, or serve the model (trade eval serve) and use --policy llm",
        )


def play_into(
    evaluation: TasksEval,
    policy: Policy,
    settings: RunSettings,
    out: Path,
    records: list[EpisodeRecord],
    servers: Sequence[str],
    concurrency: int,
    progress: bool,
    workers: int = 1,
) -> None:
    """Play the (task, sample) pairs ``records`` lacks, each episode's trajectory and record appended to ``out``
    (and the record to ``records``) as it finishes."""
    from tqdm import tqdm

    pending = evaluation.pending(records)
    first = evaluation.schemes[0].name
    total = len(evaluation.records) * evaluation.samples
    log.info("tasks.start", out=str(out), policy=policy.name, episodes=total, done=len(records), workers=workers)
    bar = tqdm(
        total=total, initial=total - len(pending), desc=policy.name, unit="ep", disable=None if progress else True
    )
    scores = [r.rewards[first].score for r in records if r.status == "done"]
    count, total_score = len(scores), sum(scores)  # the bar's running mean (a mean of every score grew with the run)
    trajectories, episodes = out / TRAJECTORIES, out / EPISODES

    def take(appender: Appender, record: EpisodeRecord, record_json: str, trajectory_json: str) -> None:
        nonlocal count, total_score
        appender.append(trajectories, trajectory_json)
        appender.append(episodes, record_json)
        records.append(record)
        if record.status == "done":
            count, total_score = count + 1, total_score + record.rewards[first].score
        else:
            log.warning("tasks.episode_failed", task=record.task_id, sample=record.sample, reason=record.reason)
        if count:  # shown when the bar next redraws (at tqdm's own pace), not redrawn for each episode
            bar.set_postfix_str(f"{first} {total_score / count:+.3f}", refresh=False)
        bar.update()

    async def play(appender: Appender) -> None:
        async with shared_clients(concurrency):
            async for record, trajectory in evaluation.episodes(policy, settings, pending, servers, concurrency):
                take(appender, record, record.model_dump_json(), trajectory.model_dump_json())

    with bar, Appender() as appender, frozen_heap():
        if workers > 1 and len(pending) > 1:
            for record_json, trajectory_json in in_workers(
                evaluation, policy, settings, pending, servers, concurrency, workers
            ):
                take(appender, EpisodeRecord.model_validate_json(record_json), record_json, trajectory_json)
        else:
            asyncio.run(play(appender))


def in_workers(
    evaluation: TasksEval,
    policy: Policy,
    settings: RunSettings,
    pending: Sequence[tuple[TaskRecord, int]],
    servers: Sequence[str],
    concurrency: int,
    workers: int,
) -> Iterator[tuple[str, str]]:
    """Play ``pending`` in ``workers`` forked processes, each with its own event loop, every ``workers``-th pair
    and its share of ``concurrency`` in flight: one event loop's harness is one core's worth (encoding, tool
    texts, scoring). Yields each episode's record and trajectory as JSON as it finishes, for this process alone to
    write. A worker that fails or dies stops the run with one line; the episodes already yielded stay written."""
    import multiprocessing
    import queue as queues

    fork = multiprocessing.get_context("fork")  # the store's memory maps, the tasks and the plugins come along
    results = fork.Queue()
    each = -(-concurrency // workers)
    started = [
        fork.Process(
            target=_play_share,
            args=(evaluation, policy, settings, pending[n::workers], servers, each, results),
            daemon=True,
        )
        for n in range(min(workers, len(pending)))
    ]
    for process in started:
        process.start()
    running = len(started)
    try:
        while running:
            try:
                message = results.get(timeout=1.0)
            except queues.Empty:
                dead = [p for p in started if p.exitcode not in (None, 0)]
                if dead and results.empty():
                    raise TradeError(
                        f"an evaluation worker died (exit code {dead[0].exitcode})", hint="rerun with --resume"
                    ) from None
                continue
            if message is None:
                running -= 1
            elif isinstance(message, str):
                raise TradeError(f"an evaluation worker failed: {message}", hint="rerun with --resume")
            else:
                yield message
    finally:
        for process in started:
            if process.is_alive():
                process.terminate()
            process.join()


def _play_share(
    evaluation: TasksEval,
    policy: Policy,
    settings: RunSettings,
    share: Sequence[tuple[TaskRecord, int]],
    servers: Sequence[str],
    concurrency: int,
    results: Any,
) -> None:
    """A worker of :func:`in_workers`: its episodes' (record, trajectory) JSON, then None; or its error's line."""

    async def play() -> None:
        async with shared_clients(concurrency):
            async for record, trajectory in evaluation.episodes(policy, settings, share, servers, concurrency):
                results.put((record.model_dump_json(), trajectory.model_dump_json()))

    try:
        asyncio.run(play())
    except BaseException as error:  # the parent reports it in one line
        results.put(error_line(error))
        return
    results.put(None)


YOUNG_GENERATION = 10_000
"""Allocations between the collector's young collections while episodes play (Python's default: 700)."""


@contextmanager
def frozen_heap() -> Iterator[None]:
    """What is alive before the episodes play (the store, the tasks, every import) kept out of the garbage
    collector's way while they do: its full collections rescanned all of it, a tenth of the harness's CPU per
    episode. The young generation is collected every :data:`YOUNG_GENERATION` allocations meanwhile: with
    hundreds of episodes in flight most young objects are alive at a collection (requests, messages, models),
    so each of the default's frequent collections scanned and promoted them again; fewer collections find
    more of them already gone (the collector's time a run, measured with ``gc.callbacks``: 22 ms -> 7 ms for
    342 episodes at 256 in flight). Left as it is where the process already froze its heap."""
    if gc.get_freeze_count():
        yield
        return
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], YOUNG_GENERATION), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def new_manifest(
    evaluation: TasksEval,
    policy_name: str,
    settings: RunSettings,
    *,
    command: list[str],
    tasks: Path,
    split: str,
    servers: Sequence[str],
    data: Path,
    policy_dist: str = "trade-eval",
) -> TasksManifest:
    return TasksManifest(
        **manifest_fields(
            policy_name, settings, command=command, data=data, store=evaluation.store, policy_dist=policy_dist
        ),
        base_urls=list(servers),
        tasks=TasksRef(
            path=str(Path(tasks).resolve()),
            split=split,
            count=len(evaluation.records),
            fingerprint=tasks_fingerprint(evaluation.records),
        ),
        samples=evaluation.samples,
        schemes={s.name: s.settings.model_dump(mode="json") for s in evaluation.schemes},
        weights=list(DEFAULT_WEIGHTS),
        anonymized=evaluation.anonymized,
    )
