"""trade-data benchmarks on the real sample data, each read beside the same read through pyqlib.

    python benchmarks/bench_data.py [--data ../shared/data/cn-csi300] [--calls 20000] [--write docs/benchmarks.md]

Reads use random (T0, symbol) pairs so neither side is flattered by repeating one cached query.
qlib runs with kernels=1 (its fastest setting for single queries, see docs) and its default
in-memory cache. Times are wall-clock per call on this machine, single process.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common
import numpy as np

POOL = 30
WINDOW = 20


def load_in_fresh_process(dataset: Path) -> tuple[float, float, float]:
    """(load seconds, peak RSS MB, RSS MB before loading) of MarketStore.load in a new interpreter."""
    code = (
        "import re, time, sys\n"
        "from trade_data.store import MarketStore\n"
        "def hwm(): return int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) / 1024\n"
        "before = hwm()\n"
        "t = time.perf_counter(); store = MarketStore.load(sys.argv[1]); took = time.perf_counter() - t\n"
        "print(took, hwm(), before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(dataset)], capture_output=True, text=True, check=True)
    took, peak, before = map(float, out.stdout.split()[-3:])  # the last line: logs may come before it
    return took, peak, before


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=20000, help="calls per MarketStore read")
    parser.add_argument("--qlib-calls", type=int, default=300, help="calls per D.features read")
    args = parser.parse_args()

    import qlib
    from qlib.data import D

    from trade_data.store import MarketStore
    from trade_data.summary import market_summary

    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        imports = []
        for attempt in range(2):
            dataset = Path(tmp) / f"cn{attempt}"
            start = time.perf_counter()
            common.import_sample(args.data, dataset)
            imports.append(time.perf_counter() - start)
        rows.append(("import daily.parquet (994,746 rows) -> Qlib dir", f"{min(imports):.2f} s", "-", "-"))

        # The first load of a dataset version builds its memory-mapped arrays; later ones (any process) map them.
        first, *loads = [load_in_fresh_process(dataset) for _ in range(4)]
        took = statistics.median(x[0] for x in loads)
        peak = statistics.median(x[1] for x in loads)
        before = statistics.median(x[2] for x in loads)
        rows.append(("MarketStore.load, first of this dataset (builds the arrays)", f"{first[0]:.2f} s", "-", "-"))
        rows.append(("MarketStore.load (arrays built, fresh process)", f"{took:.2f} s", "-", "-"))
        rows.append(("peak RSS after load (process total)", f"{peak:.0f} MB", f"({before:.0f} MB before load)", "-"))

        store = MarketStore.load(dataset)
        rng = np.random.default_rng(0)
        days = store.calendar[300:]
        picks = [days[i] for i in rng.integers(0, len(days), 1000)]
        distinct = [store.asof(d) for d in picks]
        members = [v.members("csi300") for v in distinct]
        views = [distinct[i % 1000] for i in range(args.calls)]
        symbols = [str(rng.choice(members[i % 1000])) for i in range(args.calls)]
        pools = [list(rng.choice(members[i % 1000], POOL, replace=False)) for i in range(min(args.calls, 5000))]

        ours = {
            "asof(T0) view": common.timed([lambda d=d: store.asof(d) for d in picks]),
            f"{WINDOW}-day window, one symbol": common.timed(
                [lambda v=v, s=s: v.window(s, WINDOW) for v, s in zip(views, symbols, strict=True)]
            ),
            f"cross-section, {POOL}-stock pool": common.timed(
                [lambda v=v, p=p: v.cross_section(p) for v, p in zip(views, pools, strict=False)]
            ),
            # A view memoises its summary: clearing the memo first times the computation, not the lookup (~2 us).
            "market summary": common.timed([lambda v=v: (v.memo.clear(), market_summary(v)) for v in views[:2000]]),
        }

        qlib.init(provider_uri=str(dataset), region="cn", kernels=1)
        fields = ["$open", "$high", "$low", "$close", "$volume"]
        cal = store.calendar
        n = args.qlib_calls

        def q_window(view, symbol):  # type: ignore[no-untyped-def]
            start = cal[max(0, view.index - 3 * WINDOW)]
            return D.features([symbol], fields, start_time=start, end_time=cal[view.index]).tail(WINDOW)

        def q_section(view, pool):  # type: ignore[no-untyped-def]
            return D.features(pool, fields, start_time=cal[view.index], end_time=cal[view.index])

        def q_summary(view):  # type: ignore[no-untyped-def]
            t = view.index
            D.features(["SH000001"], ["$close", "$volume"], start_time=cal[max(0, t - 273)], end_time=cal[t])
            D.features(["SH000300", "SH000905"], ["$close"], start_time=cal[max(0, t - 21)], end_time=cal[t])
            universe = D.instruments("csi300")
            return D.features(universe, ["$close", "Ref($close, 1)"], start_time=cal[t], end_time=cal[t])

        theirs = {
            f"{WINDOW}-day window, one symbol": common.timed(
                [lambda v=v, s=s: q_window(v, s) for v, s in zip(views[:n], symbols[:n], strict=True)]
            ),
            f"cross-section, {POOL}-stock pool": common.timed(
                [lambda v=v, p=p: q_section(v, p) for v, p in zip(views[:n], pools[:n], strict=True)]
            ),
            "market summary": common.timed([lambda v=v: q_summary(v) for v in views[: max(5, n // 10)]]),
        }
        for name, samples in ours.items():
            p50, p99 = common.percentiles(samples)
            if name in theirs:
                q50, q99 = common.percentiles(theirs[name])
                ratio = f"{q50 / p50:,.0f}x"
                rows.append((name, f"{p50:,.1f} / {p99:,.1f} us", f"{q50:,.0f} / {q99:,.0f} us", ratio))
            else:
                rows.append((name, f"{p50:,.1f} / {p99:,.1f} us", "-", "-"))

    header = (
        f"{common.machine()}; {args.calls:,} calls per MarketStore read, {args.qlib_calls} per D.features read; "
        "times are p50 / p99 per call, ratio = D.features p50 / MarketStore p50."
    )
    common.report(header, ["what", "trade-data", "qlib D.features", "ratio"], rows, args.write)


if __name__ == "__main__":
    main()
