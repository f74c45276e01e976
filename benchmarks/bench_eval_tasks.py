"""`trade eval tasks` with the llm policy against a local OpenAI-protocol server that answers every request after
--latency seconds (trade_eval.testing.FaultServer: real HTTP on 127.0.0.1, the model replaced by a script):
episodes per second at each --concurrency, the whole run (Episode, scoring, appends) included.

    python benchmarks/bench_eval_tasks.py [--data ../shared/data/cn-csi300] [--latency 0.2] [--episodes 256]

The server runs in its own process, as vLLM would (its threads would otherwise share the harness's GIL).
Each episode is --requests replies (tool calls, then TakeAction(stop)), so one takes at least requests x latency
however fast the harness is. Concurrency 1 plays --serial-episodes only (the rest would take minutes of waiting)
and its time for --episodes is extrapolated from its time per episode; the table says so. The CPU columns are
the harness's (this process: asyncio, aiohttp, Episodes, scoring, appends) and the server's per episode: with
both near one core's worth the run is CPU-bound, not waiting on the latency.
"""

from __future__ import annotations

import multiprocessing
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


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds before the server answers a request")
    parser.add_argument("--episodes", type=int, default=256, help="tasks evaluated at each concurrency")
    parser.add_argument("--serial-episodes", type=int, default=16, help="tasks played at concurrency 1")
    parser.add_argument("--requests", type=int, default=2, help="replies per episode (the last one stops)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    args = parser.parse_args()

    from trade_core.logging import configure_logging

    configure_logging(level="error")

    from trade_data.store import MarketStore
    from trade_eval.policies.llm import LLMPolicy
    from trade_eval.policy import RunSettings
    from trade_eval.tasks_eval import TasksEval, load_tasks, new_manifest, run_tasks
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
        for n, concurrency in enumerate(args.concurrency):
            count = args.serial_episodes if concurrency == 1 else args.episodes
            evaluation = TasksEval(store, records[:count], [get_scheme("bucketed")])
            settings = RunSettings(model="bench")
            out = Path(tmp) / f"run-{n}"
            with server_process(script) as server:
                manifest = new_manifest(
                    evaluation,
                    "llm",
                    settings,
                    command=[],
                    tasks=Path(tmp) / "tasks",
                    split=split,
                    servers=[server["url"]],
                    data=data,
                )
                started, cpu = time.perf_counter(), time.process_time()
                summary = run_tasks(
                    evaluation,
                    LLMPolicy(),
                    settings,
                    out,
                    manifest,
                    servers=[server["url"]],
                    concurrency=concurrency,
                    progress=False,
                )
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            assert summary["played"] == count, summary["failure_reasons"]
            per_episode = wall / count
            total = per_episode * args.episodes
            serial = serial or total
            rows.append(
                (
                    str(concurrency),
                    str(count),
                    f"{total:.1f} s" + (" (extrapolated)" if count < args.episodes else ""),
                    f"{count / wall:.1f}",
                    f"{serial / total:.0f}x",
                    str(server["peak"]),
                    f"{cpu / count * 1e3:.1f} ms",
                    f"{server['cpu'] / count * 1e3:.1f} ms",
                )
            )
    header = (
        f"{common.machine()}; `trade eval tasks` with the llm policy, {args.requests} replies an episode, the "
        f"server answering each after {args.latency * 1e3:.0f} ms (latency floor {args.requests * args.latency:.1f} s "
        f"an episode); time for {args.episodes} episodes"
    )
    columns = [
        "concurrency",
        "episodes played",
        f"time for {args.episodes}",
        "episodes/s",
        "speed-up vs 1",
        "peak requests in flight",
        "harness CPU per episode",
        "server CPU per episode",
    ]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
