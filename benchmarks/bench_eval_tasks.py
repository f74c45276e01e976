"""`trade eval tasks` with the llm policy against a local OpenAI-protocol server that answers every request after
--latency seconds (trade_eval.testing.FaultServer: real HTTP on 127.0.0.1, the model replaced by a script):
episodes per second at each --concurrency, the whole run (Episode, scoring, appends) included.

    python benchmarks/bench_eval_tasks.py [--data ../shared/data/cn-csi300] [--latency 0.2] [--episodes 256]

The server runs in its own process, as vLLM would (its threads would otherwise share the harness's GIL).
Each episode is --requests replies (tool calls, then TakeAction(stop)), so one takes at least requests x latency
however fast the harness is. Concurrency 1 plays --serial-episodes only (the rest would take minutes of waiting)
and its time for --episodes is extrapolated from its time per episode; the table says so. The CPU columns are
the harness's (this process and its --workers: asyncio, aiohttp, Episodes, scoring, appends) and the server's per
episode: with both near one core's worth the run is CPU-bound, not waiting on the latency. ``--workers 1 2`` runs
each concurrency (above 1) with each number of worker processes, one after the other. ``--policy momentum`` (any
baseline) plays without the server: only the harness's CPU then, which is where more workers use more cores.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import _common as common

SPLIT = "test=2025-01-01:2025-06-30"


@contextmanager
def server_process(script: Callable) -> Iterator[dict]:
    """A FaultServer answering with ``script`` in a forked process: yields ``{"url"}``, then ``peak``,
    ``requests`` (served) and ``cpu`` (the server process's CPU seconds) once the block ends."""
    from trade_eval.testing import FaultServer

    fork = multiprocessing.get_context("fork")
    report, stop = fork.Queue(), fork.Event()

    def serve() -> None:
        cpu = time.process_time()
        with FaultServer(script) as server:
            report.put(server.url)
            stop.wait()
            report.put((server.peak, len(server.requests), time.process_time() - cpu))

    child = fork.Process(target=serve, daemon=True)
    child.start()
    found = {"url": report.get(timeout=30)}
    try:
        yield found
    finally:
        stop.set()
        found["peak"], found["requests"], found["cpu"] = report.get(timeout=30)
        child.join()


def harness_cpu() -> float:
    """CPU seconds of this process and of its children already joined: the workers of a run, not the server
    (joined when its block ends, after the run is timed)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds before the server answers a request")
    parser.add_argument(
        "--episodes", type=int, default=256, help="tasks evaluated at each concurrency (at most those of the split)"
    )
    parser.add_argument("--samples", type=int, default=1, help="samples of each task (episodes = tasks x samples)")
    parser.add_argument("--serial-episodes", type=int, default=16, help="tasks played at concurrency 1")
    parser.add_argument("--requests", type=int, default=2, help="replies per episode (the last one stops)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="`--workers` values, each run beside the others"
    )
    parser.add_argument(
        "--policy", default="llm", help="a registered policy: llm talks to the server, a baseline needs none"
    )
    parser.add_argument(
        "--log-level", default="info", help="structlog's level, as `trade --log-level` (info: the CLI's default)"
    )
    args = parser.parse_args()

    from trade_core.logging import configure_logging

    configure_logging(level=args.log_level)  # the lines go to stderr: send it to a file or /dev/null

    from trade_data.store import MarketStore
    from trade_eval.policy import POLICIES, RunSettings
    from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks
    from trade_eval.testing import stop_after
    from trade_reward.schemes import get_scheme
    from trade_reward.taskbuilder import build_tasks

    script = stop_after(args.requests, args.latency)

    rows, serial = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        data = common.import_sample(args.data, Path(tmp) / "cn")
        build_tasks(data, Path(tmp) / "tasks", split=SPLIT, pool_size="10-30", per_day=3, seed=0)
        records, split, _ = load_tasks(Path(tmp) / "tasks", "test")
        store = MarketStore.load(data)
        full = min(args.episodes, len(records)) * args.samples
        runs = [(c, w) for c in args.concurrency for w in args.workers if c > 1 or w == 1]
        for n, (concurrency, workers) in enumerate(runs):
            tasks = min(args.serial_episodes if concurrency == 1 else args.episodes, len(records))
            evaluation = TasksEval(store, records[:tasks], [get_scheme("bucketed")], args.samples)
            count = tasks * args.samples
            settings = RunSettings(model="bench")
            out = Path(tmp) / f"run-{n}"
            with server_process(script) as server:
                servers = [server["url"]] if args.policy == "llm" else []
                manifest = new_manifest(
                    evaluation,
                    args.policy,
                    settings,
                    command=[],
                    tasks=Path(tmp) / "tasks",
                    split=split,
                    servers=servers,
                    data=data,
                )
                started, cpu = time.perf_counter(), harness_cpu()
                summary = run_tasks(
                    evaluation,
                    POLICIES.get(args.policy),
                    settings,
                    out,
                    manifest,
                    servers=servers,
                    concurrency=concurrency,
                    workers=workers,
                    progress=False,
                )
                wall, cpu = time.perf_counter() - started, harness_cpu() - cpu
            assert summary.played == count, summary.failure_reasons
            per_episode = wall / count
            total = per_episode * full
            serial = serial or total
            rows.append(
                (
                    str(concurrency),
                    str(workers),
                    str(count),
                    f"{total:.1f} s" + (" (extrapolated)" if count < full else ""),
                    f"{count / wall:.1f}",
                    f"{serial / total:.1f}x",
                    str(server["peak"]),
                    f"{cpu / count * 1e3:.2f} ms",
                    f"{server['cpu'] / count * 1e3:.2f} ms",
                )
            )
    header = (
        f"{common.machine()}; `trade eval tasks` with the {args.policy} policy, {args.requests} replies an episode, "
        f"the server answering each after {args.latency * 1e3:.0f} ms (latency floor "
        f"{args.requests * args.latency:.1f} s an episode); time for {full} episodes ({args.samples} samples a task)"
    )
    columns = [
        "concurrency",
        "workers",
        "episodes played",
        f"time for {full}",
        "episodes/s",
        "speed-up vs the first row",
        "peak requests in flight",
        "harness CPU per episode",
        "server CPU per episode",
    ]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
