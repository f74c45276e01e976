"""compute_alpha_factor's engine on the real sample data, beside the same factor through pyqlib.

    python benchmarks/bench_alpha.py [--data ../shared/data/cn-csi300] [--calls 2000] [--qlib-calls 100]

Each call is one Alpha158 factor at a random T0 for a random 30-stock CSI300 pool. Ours is
``value_at_t0`` on columns already read, and the whole tool path ``columns_at(rows=lookback+1)``
plus ``value_at_t0``; qlib is ``D.features(pool, [expr], T0, T0)`` with kernels=1 (it extends the
window to the left by itself) and its default in-memory cache. Times are p50 / p99 per call.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from trade_data.store import PointInTimeView

HERE = Path(__file__).resolve().parent
POOL = 30
FACTORS = ("KMID", "ROC20", "STD20", "RSQR60", "CORR20")


def percentiles(samples_ns: list[int]) -> tuple[float, float]:
    us = np.array(samples_ns) / 1e3
    return float(np.percentile(us, 50)), float(np.percentile(us, 99))


def timed(calls: list[Callable[[], object]]) -> list[int]:
    samples = []
    for call in calls:
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return samples


def bench_factor(
    name: str, text: str, views: list[PointInTimeView], pools: list[list[str]], qlib_calls: int
) -> tuple[str, ...]:
    """One table row: our engine alone, the tool path, and D.features, over the same (T0, pool) calls."""
    from qlib.data import D

    from trade_tools.alpha import alpha158, columns_at, lookback, value_at_t0

    node = alpha158()[name]
    need = lookback(node) + 1
    calls = list(zip(views, pools, strict=True))
    read = [columns_at(v, p, rows=need) for v, p in calls]
    engine = timed([lambda c=c: value_at_t0(node, c) for c in read])
    tool = timed([lambda v=v, p=p: value_at_t0(node, columns_at(v, p, rows=need)) for v, p in calls])
    theirs = timed(
        [lambda v=v, p=p: D.features(p, [text], start_time=v.date, end_time=v.date) for v, p in calls[:qlib_calls]]
    )
    (e50, e99), (t50, t99), (q50, q99) = map(percentiles, (engine, tool, theirs))
    return (
        f"{name} `{text}`", f"{e50:,.0f} / {e99:,.0f}", f"{t50:,.0f} / {t99:,.0f}",
        f"{q50:,.0f} / {q99:,.0f}", f"{q50 / t50:,.0f}x",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("TRADE_SAMPLE_DATA", HERE.parent.parent / "shared/data/cn-csi300")),
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per factor through our engine")
    parser.add_argument("--qlib-calls", type=int, default=100, help="calls per factor through D.features")
    parser.add_argument("--write", type=Path, help="also write the markdown table to this file")
    args = parser.parse_args()

    import qlib
    from qlib.contrib.data.loader import Alpha158DL

    from trade_data.importer import import_table
    from trade_data.store import MarketStore

    with tempfile.TemporaryDirectory() as tmp:
        dataset = import_table(
            args.data / "daily.parquet", Path(tmp) / "cn", calendar_file=args.data / "calendar.txt",
            universe_files={"csi300": args.data / "csi300.txt"},
        )  # fmt: skip
        store = MarketStore.load(dataset)
        qlib.init(provider_uri=str(dataset), region="cn", kernels=1)
        rng = np.random.default_rng(0)
        views = [store.asof(store.calendar[i]) for i in rng.integers(120, len(store.calendar), args.calls)]
        pools = [list(rng.choice(v.members("csi300"), POOL, replace=False)) for v in views]
        fields, names = Alpha158DL.get_feature_config()
        texts = dict(zip(names, fields, strict=True))
        rows = [bench_factor(name, texts[name], views, pools, args.qlib_calls) for name in FACTORS]

    header = (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{POOL}-stock pools at random T0s, {args.calls:,} calls per factor for ours, {args.qlib_calls} for "
        "D.features; times in us, p50 / p99 per call; ratio = D.features p50 / tool path p50."
    )
    table = [
        "| factor | value_at_t0 | columns_at + value_at_t0 | qlib D.features | ratio |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    text = header + "\n\n" + "\n".join(table) + "\n"
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
