"""Opening a dataset in N worker processes at once: keyed by the writers' stamp vs by a scan of every feature file.

    python benchmarks/bench_open.py DIR [--workers 8] [--rounds 3] [--write FILE]

DIR is a dataset a writer made (e.g. ``trade data synth --symbols 5500 --start 2006-01-01 --end 2025-12-31``,
the whole A-share market over 20 years: 38,521 feature files). Its unstamped twin is a hard-linked copy whose
``trade.json`` has no stamp, as datasets written before stamps have: opening it scans the feature files, as
every open did before. Each round starts the workers for one dataset together (each imports first, then all
open at once) and alternates the two datasets, so both see the same load. Cold is a fresh process's first
open; warm is a second open in the same process.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common

WORKER = """
import json, sys, time
from trade_data.store import MarketStore
print('ready', flush=True)
sys.stdin.readline()
t = time.perf_counter(); MarketStore.load(sys.argv[1]); cold = time.perf_counter() - t
t = time.perf_counter(); MarketStore.load(sys.argv[1]); warm = time.perf_counter() - t
print(json.dumps({'cold': cold, 'warm': warm}), flush=True)
"""


def unstamped_twin(dataset: Path, folder: Path) -> Path:
    """A hard-linked copy of ``dataset`` without the stamp (its arrays built once, not timed)."""
    from trade_data.qlib_dir import META_FILE
    from trade_data.store import MarketStore

    twin = folder / dataset.name
    subprocess.run(["cp", "-al", str(dataset), str(twin)], check=True)
    meta = json.loads((twin / META_FILE).read_text())
    meta.pop("stamp", None)
    (twin / META_FILE).unlink()  # a hard link: writing in place would change the original too
    (twin / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    MarketStore.load(twin)
    return twin


def together(dataset: Path, count: int) -> tuple[list[dict], float]:  # type: ignore[type-arg]
    """Each worker's open times once all were told to open at once, and the wall time until the last of them
    reported (after its second open)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(dataset)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(count)
    ]
    for p in procs:
        while p.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
            pass
    start = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")  # type: ignore[union-attr]
        p.stdin.flush()  # type: ignore[union-attr]
    reports = []
    for p in procs:
        reports.append(json.loads(next(line for line in p.stdout if line.startswith("{"))))  # type: ignore[union-attr]
    wall = time.perf_counter() - start
    for p in procs:
        p.communicate()
    return reports, wall


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("dataset", type=Path, help="a dataset written by trade data import/synth/download")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from trade_data.qlib_dir import read_meta

    if not read_meta(args.dataset).stamp:
        parser.error(f"{args.dataset} has no stamp: write it with trade data import or synth")
    with tempfile.TemporaryDirectory(dir=args.dataset.parent) as tmp:
        start = time.perf_counter()
        twin = unstamped_twin(args.dataset, Path(tmp))
        built = time.perf_counter() - start
        results: dict[str, list[tuple[list[dict], float]]] = {"stamp": [], "scan": []}  # type: ignore[type-arg]
        for _ in range(args.rounds):
            for name, path in (("stamp", args.dataset), ("scan", twin)):
                results[name].append(together(path, args.workers))
        shutil.rmtree(twin, ignore_errors=True)
    rows = []
    for name, runs in results.items():
        cold = [r["cold"] for reports, _ in runs for r in reports]
        warm = [r["warm"] for reports, _ in runs for r in reports]
        walls = [wall for _, wall in runs]
        rows.append(
            (
                "writer's stamp" if name == "stamp" else "scan of the feature files (no stamp)",
                f"{statistics.median(cold):.2f} s (max {max(cold):.2f} s)",
                f"{statistics.median(walls):.2f} s",
                f"{statistics.median(warm) * 1e3:,.0f} ms",
            )
        )
    stamp, scan = (statistics.median(r["cold"] for reports, _ in results[n] for r in reports) for n in results)
    files = sum(1 for _ in (args.dataset / "features").rglob("*.bin"))
    load = os.getloadavg()
    header = (
        f"{common.machine()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end; "
        f"{args.dataset.name}: {files:,} feature files; {args.workers} workers opening together, {args.rounds} rounds "
        f"alternating the datasets; the unstamped twin's arrays built in {built:.0f} s first. "
        f"Scan / stamp, cold: {scan / stamp:.1f}x."
    )
    common.report(
        header,
        [
            "keyed by",
            "open, cold (median of every worker)",
            "until the last reported (both opens)",
            "open, warm (same process)",
        ],
        rows,
        args.write,
    )


if __name__ == "__main__":
    main()
