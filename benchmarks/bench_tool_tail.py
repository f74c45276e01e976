"""Where `get_price_data`'s slow calls come from: each call's time beside the page faults it took and whether the
garbage collector ran inside it, cold (a fresh process's first touch of the memory-mapped bars) and warm (the same
days and symbols again), with the collector as the CLI leaves it, and frozen as `trade eval tasks` runs episodes.

    python benchmarks/bench_tool_tail.py [--data ../shared/data/cn-csi300 | --dataset DIR] [--drop-caches]

Every call is on a fresh Episode (its per-symbol memo empty), so each computes its text; the Episodes are started
before the timing. One process, one core. The tail is the calls above 5x the pass's p50 (the issue's bound on
p99): each is credited to the collector when a collection ran inside it, else to page faults when it took any,
else to neither. The last pass runs beside ``--busy`` processes spinning on the cores, as a shared machine's load
would: there the tail is the scheduler's, in no column of the call's own.
"""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import _common as common
import numpy as np

INDICATORS = ["MA5", "MA20", "MACD_DIF", "RSI_14", "VOL_20", "BOLL_UPPER"]


class Collections:
    """Counts the garbage collector's collections (gc.callbacks), so a call can tell whether one ran inside it."""

    def __init__(self) -> None:
        self.count = 0
        gc.callbacks.append(self.seen)

    def seen(self, phase: str, info: dict) -> None:
        self.count += phase == "start"


def faults() -> tuple[int, int]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


def one_pass(calls: list, collections: Collections) -> np.ndarray:
    """Per call: nanoseconds, minor faults, major faults, collections."""
    out = np.zeros((len(calls), 4), dtype=np.int64)
    for i, (episode, arguments) in enumerate(calls):
        minor, major = faults()
        seen = collections.count
        start = time.perf_counter_ns()
        episode.call("get_price_data", arguments)
        out[i, 0] = time.perf_counter_ns() - start
        after = faults()
        out[i] = out[i, 0], after[0] - minor, after[1] - major, collections.count - seen
    return out


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` other processes spinning on a core each, the load a shared machine puts beside the calls (not
    forked: a fork would share this process's pages copy-on-write, and its writes would then fault)."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    time.sleep(0.5)
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def row(name: str, samples: np.ndarray) -> tuple[str, ...]:
    us = samples[:, 0] / 1e3
    p50, p99, top = np.percentile(us, 50), np.percentile(us, 99), us.max()
    tail = us > 5 * p50
    collected = tail & (samples[:, 3] > 0)
    faulted = tail & ~collected & (samples[:, 1] + samples[:, 2] > 0)
    slow = max(int(tail.sum()), 1)
    return (
        name,
        f"{p50:,.0f} / {np.percentile(us, 90):,.0f} / {p99:,.0f} / {top:,.0f} us",
        f"{p99 / p50:.1f}x",
        f"{int(tail.sum())} ({tail.mean():.2%})",
        " / ".join(
            f"{part / slow:.0%}" for part in (collected.sum(), faulted.sum(), (tail & ~collected & ~faulted).sum())
        ),
        f"{samples[:, 1].mean():.2f} / {samples[:, 2].sum()}",
        f"{(samples[:, 3] > 0).mean():.2%}",
    )


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="calls in each pass")
    parser.add_argument("--dataset", type=Path, help="an existing dataset (e.g. `trade data synth`) instead of --data")
    parser.add_argument(
        "--drop-caches",
        action="store_true",
        help="drop the kernel's page cache before the store opens (Linux, root), so the cold pass reads the disk",
    )
    parser.add_argument(
        "--busy", type=int, default=2, help="busy-looping processes beside the last pass (0: no such pass)"
    )
    args = parser.parse_args()

    from trade_core.logging import configure_logging
    from trade_data.bar_tables import precompute
    from trade_data.store import MarketStore
    from trade_tools.episode import Episode
    from trade_tools.sampler import day_task

    configure_logging(level="info")  # the CLI's default: a tool call logs nothing at info
    collections = Collections()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dataset = args.dataset or common.import_sample(args.data, Path(tmp) / "cn")
        if args.drop_caches:
            common.drop_page_cache()
        start = time.perf_counter()
        precompute(dataset)  # what the writers leave: built once per dataset version, then memory-mapped
        built = time.perf_counter() - start
        store = MarketStore.load(dataset)
        rng = np.random.default_rng(0)
        days = [store.calendar[i].date().isoformat() for i in rng.integers(300, len(store.calendar), 200)]
        tasks = [day_task(store, d, pool_size=20, seed=i) for i, d in enumerate(days)]
        picks = [(tasks[i % len(tasks)], i % 20) for i in range(args.calls)]

        def calls() -> list:
            fresh = [(Episode.start(task, store), n) for task, n in picks]
            return [
                (e, json.dumps({"symbol": e.task.pool[n], "period": "20d", "indicators": INDICATORS})) for e, n in fresh
            ]

        rows.append(row("cold: first touch of each day's bars", one_pass(calls(), collections)))
        rows.append(row("warm: the same calls again", one_pass(calls(), collections)))
        batch = calls()
        gc.freeze()  # as `trade eval tasks` plays: what was alive before kept out of the collections
        rows.append(row("warm, heap frozen", one_pass(batch, collections)))
        gc.unfreeze()
        batch = calls()
        gc.disable()
        rows.append(row("warm, collector off", one_pass(batch, collections)))
        gc.enable()
        if args.busy:
            batch = calls()
            with busy(args.busy):
                rows.append(row(f"warm, {args.busy} busy processes beside it", one_pass(batch, collections)))

    header = (
        f"{common.machine()} (one used); {args.calls:,} `get_price_data` calls a pass (6 indicators, 20d, random "
        f"days and symbols of {args.dataset or 'the real sample'}), each on a fresh Episode; the tail = calls above "
        "5x the pass's p50, "
        f"credited to the collector when one ran inside the call, else to page faults when it took any. The "
        f"derived tables were built before the passes ({built:.2f} s, once per dataset version)"
        + ("; the page cache was dropped before the store opened." if args.drop_caches else ".")
    )
    columns = [
        "pass",
        "p50 / p90 / p99 / max",
        "p99 / p50",
        "calls in the tail",
        "tail: collector / page faults / neither",
        "minor faults a call / major in all",
        "calls with a collection",
    ]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
