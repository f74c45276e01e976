"""The market summary (in every prompt): T0's rows of the precomputed tables vs computing it from the view's bars.

    python benchmarks/bench_summary.py [--sizes real DIR] [--calls 2000] [--fresh 5] [--write FILE]

A size is ``real`` (the cn-csi300 sample imported) or a dataset folder (e.g. the whole market from
``trade data synth --symbols 5500 --start 2006-01-01 --end 2025-12-31``). Warm: one process, random days, the
view's memo cleared before each call, the two ways alternating call by call (the same load on both). Cold: the
first summary of a fresh process (its store already open), the two ways alternating process by process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common
import numpy as np

FIRST = """
import sys, time
from trade_data.store import MarketStore
from trade_data.summary import market_summary
store = MarketStore.load(sys.argv[1])
view = store.asof(store.calendar[int(sys.argv[2])])
t = time.perf_counter(); market_summary(view, precomputed=sys.argv[3] == '1'); print(time.perf_counter() - t)
"""


def warm(dataset: Path, calls: int) -> dict[bool, list[int]]:
    """Nanoseconds per summary, each way, alternating."""
    from trade_data.store import MarketStore
    from trade_data.summary import market_summary

    store = MarketStore.load(dataset)
    rng = np.random.default_rng(0)
    views = [store.asof(store.calendar[t]) for t in rng.integers(0, len(store.calendar), calls)]
    samples: dict[bool, list[int]] = {True: [], False: []}
    for view in views:
        for precomputed in (True, False):
            view.memo.clear()
            start = time.perf_counter_ns()
            market_summary(view, precomputed=precomputed)
            samples[precomputed].append(time.perf_counter_ns() - start)
    return samples


def cold(dataset: Path, runs: int) -> dict[bool, list[float]]:
    """Seconds of the first summary in fresh processes, each way, alternating."""
    from trade_data.qlib_dir import read_calendar

    days = len(read_calendar(dataset))
    found: dict[bool, list[float]] = {True: [], False: []}
    for k in range(runs):
        for precomputed in (True, False):
            day = str((k * 997) % days)
            command = [sys.executable, "-c", FIRST, str(dataset), day, "1" if precomputed else "0"]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            found[precomputed].append(float(out.split()[-1]))
    return found


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--sizes", nargs="+", default=["real"], help="real and/or dataset folders")
    parser.add_argument("--calls", type=int, default=2000, help="summaries each way per dataset (warm)")
    parser.add_argument("--fresh", type=int, default=5, help="fresh processes each way per dataset (cold)")
    args = parser.parse_args()

    from trade_data.info import dataset_info

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            dataset = common.import_sample(args.data, Path(tmp) / "real") if size == "real" else Path(size)
            samples, first = warm(dataset, args.calls), cold(dataset, args.fresh)
            info = dataset_info(dataset)  # after the first open built the tables of an imported sample
            (tables, tables_99), (bars, bars_99) = (common.percentiles(samples[way]) for way in (True, False))
            rows.append(
                (
                    f"{'real' if size == 'real' else Path(size).name} ({info.symbols:,} symbols x "
                    f"{info.trading_days:,} days)",
                    f"{tables:,.1f} / {tables_99:,.1f} us",
                    f"{bars:,.0f} / {bars_99:,.0f} us",
                    f"{bars / tables:,.0f}x",
                    f"{statistics.median(first[True]) * 1e3:,.2f} ms / {statistics.median(first[False]) * 1e3:,.1f} ms",
                    f"{info.precomputed.get('summary', 0) / 1e6:,.1f} MB",
                )
            )
    load = os.getloadavg()
    header = (
        f"{common.machine()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end; "
        f"{args.calls:,} summaries each way per dataset (random days, memo cleared), {args.fresh} fresh processes "
        "each way for the first summary."
    )
    common.report(
        header,
        [
            "dataset",
            "precomputed rows p50 / p99",
            "from the bars p50 / p99",
            "ratio p50",
            "first in a fresh process: rows / bars",
            "tables",
        ],
        rows,
        args.write,
    )


if __name__ == "__main__":
    main()
