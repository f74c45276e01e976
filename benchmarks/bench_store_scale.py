"""MarketStore at scale: open time, first tool call in a fresh process, memory of N worker processes sharing
one memory-mapped dataset, reads back to back and interleaved with a cache-polluting sweep, CLI cold starts.

    python benchmarks/bench_store_scale.py [--sizes real 5000x8] [--workers 8] [--calls 2000] [--write FILE]

A size is ``real`` (the cn-csi300 sample imported), ``SYMBOLSxYEARS`` (``trade data synth`` ending
2025-12-31) or a dataset folder (e.g. one made beforehand with ``trade data synth --symbols 5500``).
Every figure of a fresh process is measured in a new interpreter. Memory is read from
``/proc/PID/smaps_rollup`` while all workers hold their view: PSS splits shared pages between the
processes that map them (their sum is the node's real use), USS is what each process alone holds.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common
import numpy as np
from bench_tools import REFERENCE_FIELDS

from trade_data.cache import CACHE_FOLDER

INDICATORS = ["MA5", "MA20", "MACD_DIF", "RSI_14", "VOL_20", "BOLL_UPPER"]
SWEEP_MB = 64
# One worker: open the store, serve tool calls on random days and symbols, report its timings and memory, then
# hold everything until the parent has read every worker (so their mappings overlap while measured).
WORKER = """
import json, re, sys, time
t = time.perf_counter()
import numpy as np
from trade_data.store import MarketStore
from trade_tools.episode import Episode, Task
imported = time.perf_counter() - t
def rollup():
    text = open('/proc/self/smaps_rollup').read()
    kb = {k: int(v) for k, v in re.findall(r'^(\\w+):\\s+(\\d+) kB', text, re.M)}
    return {'rss': kb['Rss'], 'pss': kb['Pss'], 'uss': kb['Private_Clean'] + kb['Private_Dirty']}
idle = rollup()
path, calls, seed, indicators = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
t = time.perf_counter(); store = MarketStore.load(path); opened = time.perf_counter() - t
rng = np.random.default_rng(seed)
days = rng.integers(len(store.calendar) // 4, len(store.calendar), max(calls, 1))
first = None
for i, d in enumerate(days[:calls]):
    view = store.asof(store.calendar[d])
    symbols = sorted(set(view.symbols()) - set(view.indices()))
    task = Task(task_id='t', date=view.date, pool=[symbols[int(rng.integers(0, len(symbols)))]], holdings={}, cash=1e6)
    t = time.perf_counter()
    Episode.start(task, store).call('get_price_data', {'symbol': task.pool[0], 'indicators': indicators})
    first = first if first is not None else time.perf_counter() - t
print(json.dumps({'imported': imported, 'opened': opened, 'first_call': first, 'idle': idle, 'held': rollup()}))
sys.stdout.flush()
sys.stdin.read()
"""


def dataset_for(size: str, data: Path, folder: Path) -> Path:
    """The sample imported, a synthetic market of SYMBOLSxYEARS, or a dataset folder (its precomputed arrays
    deleted, so that their build is measured)."""
    if Path(size).is_dir():
        shutil.rmtree(Path(size) / CACHE_FOLDER, ignore_errors=True)
        return Path(size)
    out = folder / size
    if size == "real":
        return common.import_sample(data, out)
    symbols, years = (int(x) for x in size.split("x"))
    from trade_data.synth import write_synthetic_market

    return write_synthetic_market(out, symbols=symbols, start=f"{2026 - years}-01-01", end="2025-12-31")


def workers(dataset: Path, count: int, calls: int) -> list[dict]:  # type: ignore[type-arg]
    """Start ``count`` workers together; their reports once every one of them holds its view."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(dataset), str(calls), str(i), json.dumps(INDICATORS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    reports = [json.loads(_report_line(p.stdout)) for p in procs]  # type: ignore[arg-type]
    for p in procs:
        p.communicate("")
    return reports


def _report_line(stream: io.TextIOBase) -> str:
    """A worker's report: its first JSON line (logs may come before it on stdout)."""
    for line in stream:
        if line.startswith("{"):
            return line
    raise RuntimeError("a worker exited without its report")


def cold_start(command: list[str], runs: int) -> float:
    """Median wall seconds of a CLI command in a fresh process."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold_starts(dataset: Path, day: str, runs: int) -> list[tuple[str, str]]:
    """Cold start of each CLI command that reads the dataset."""
    from trade_data.qlib_dir import read_instruments_file
    from trade_data.symbols import Board, board_of

    trade = str(Path(sys.executable).parent / "trade")
    listed = read_instruments_file(dataset / "instruments" / "all.txt")["symbol"]
    stock = next(s for s in listed if board_of(s) is not Board.INDEX)
    call = [trade, "tools", "call", "get_price_data", "--data", str(dataset), "--date", day, "--pool", stock]
    commands = {
        "trade data info": [trade, "data", "info", str(dataset)],
        "trade tools call get_price_data": [*call, "--args", json.dumps({"symbol": stock})],
    }
    return [(name, f"{cold_start(command, runs):.2f} s") for name, command in commands.items()]


def sweep(buffer: np.ndarray) -> None:
    """Touch every cache line of a buffer larger than the CPU caches: other work between two calls."""
    buffer += 1


def back_to_back_and_interleaved(calls: list) -> tuple[float, float]:  # type: ignore[type-arg]
    """p50 microseconds of the calls one after the other, and with a sweep before each (the sweep not timed)."""
    warm = common.percentiles(common.timed(calls))[0]
    buffer = np.zeros(SWEEP_MB * 2**20 // 8)
    samples = []
    for call in calls:
        sweep(buffer)
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return warm, common.percentiles(samples)[0]


def reads(dataset: Path, calls: int, qlib_calls: int) -> list[tuple[str, ...]]:
    """get_price_data and a 20-day window through MarketStore and D.features, both ways."""
    from trade_data.store import MarketStore
    from trade_tools.episode import Episode, Task

    store = MarketStore.load(dataset)
    rng = np.random.default_rng(0)
    days = rng.integers(len(store.calendar) // 4, len(store.calendar), calls)
    views = [store.asof(store.calendar[d]) for d in days]
    stocks = [sorted(set(v.symbols()) - set(v.indices())) for v in views]
    symbols = [pool[int(rng.integers(0, len(pool)))] for pool in stocks]
    episodes = [
        Episode.start(Task(task_id="t", date=v.date, pool=[s], holdings={}, cash=1e6), store)
        for v, s in zip(views, symbols, strict=True)
    ]
    args = {"indicators": INDICATORS}
    price = [
        lambda e=e, s=s: e.call("get_price_data", {**args, "symbol": s}) for e, s in zip(episodes, symbols, strict=True)
    ]
    window = [lambda v=v, s=s: v.window(s, 20) for v, s in zip(views, symbols, strict=True)]
    ours = {"get_price_data (6 indicators)": back_to_back_and_interleaved(price)}
    ours["20-day window"] = back_to_back_and_interleaved(window)
    theirs: dict[str, tuple[float, float]] = {}
    try:
        import qlib
        from qlib.data import D
    except ImportError:
        qlib = None
    if qlib is not None and qlib_calls:
        qlib.init(provider_uri=str(dataset), region="cn", kernels=1)
        cal, fields = store.calendar, ["$open", "$high", "$low", "$close", "$volume"]
        n = min(qlib_calls, calls)

        def q_price(view, symbol):  # type: ignore[no-untyped-def]
            return D.features(
                [symbol], REFERENCE_FIELDS, start_time=cal[max(0, view.index - 120)], end_time=cal[view.index]
            )

        theirs["get_price_data (6 indicators)"] = back_to_back_and_interleaved(
            [lambda v=v, s=s: q_price(v, s) for v, s in zip(views[:n], symbols[:n], strict=True)]
        )
        theirs["20-day window"] = back_to_back_and_interleaved(
            [
                lambda v=v, s=s: D.features([s], fields, start_time=cal[max(0, v.index - 60)], end_time=cal[v.index])
                for v, s in zip(views[:n], symbols[:n], strict=True)
            ]
        )
    rows = []
    for name, (warm, mixed) in ours.items():
        q = theirs.get(name)
        qlib_text = f"{q[0]:,.0f} / {q[1]:,.0f} us" if q else "-"
        ratio = f"{q[0] / warm:,.0f}x / {q[1] / mixed:,.0f}x" if q else "-"
        rows.append((name, f"{warm:,.1f} / {mixed:,.1f} us", qlib_text, ratio))
    return rows


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--sizes", nargs="+", default=["real", "5000x8"], help="real and/or SYMBOLSxYEARS")
    parser.add_argument("--workers", type=int, default=8, help="worker processes sharing one dataset")
    parser.add_argument("--calls", type=int, default=2000, help="get_price_data calls per worker and per read row")
    parser.add_argument("--qlib-calls", type=int, default=300, help="D.features calls per read row (0: none)")
    parser.add_argument("--cli-runs", type=int, default=3, help="runs of each CLI command (median)")
    args = parser.parse_args()

    from trade_data.info import dataset_info

    scale: list[tuple[str, ...]] = []
    read_rows: list[tuple[str, ...]] = []
    cli_rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            start = time.perf_counter()
            dataset = dataset_for(size, args.data, Path(tmp))
            made = time.perf_counter() - start
            [build] = workers(dataset, 1, 1)  # the first process builds the store's arrays and indicator tables
            [alone] = workers(dataset, 1, 1)  # a fresh process once they are built
            held = workers(dataset, args.workers, args.calls)
            info = dataset_info(dataset)
            mb = lambda kb: kb / 1024  # noqa: E731
            idle_uss = statistics.median(r["idle"]["uss"] for r in held)
            pss_total = sum(r["held"]["pss"] for r in held)
            extra = statistics.median(r["held"]["uss"] - r["idle"]["uss"] for r in held)
            scale.append(
                (
                    f"{size} ({info.symbols:,} symbols x {info.trading_days:,} days)",
                    f"{made:.1f} s; {info.bytes_on_disk / 1e6:,.0f} MB",
                    f"{build['opened']:.2f} s + {build['first_call']:.2f} s; "
                    f"{sum(info.precomputed.values()) / 1e6:,.0f} MB",
                    f"{alone['opened']:.2f} s / {alone['first_call'] * 1e3:,.0f} ms",
                    f"{statistics.median(r['opened'] for r in held):.2f} s",
                    f"{mb(pss_total):,.0f} MB ({mb(statistics.median(r['held']['rss'] for r in held)):,.0f} MB RSS"
                    " each)",
                    f"{mb(extra):,.0f} MB (idle {mb(idle_uss):,.0f} MB)",
                )
            )
            if size == args.sizes[0]:
                read_rows = reads(dataset, args.calls, args.qlib_calls)
                cli_rows = cold_starts(dataset, info.last_date, args.cli_runs)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report(args, scale, read_rows, cli_rows)
    print(printed.getvalue())
    if args.write:
        args.write.write_text(printed.getvalue())


def report(args, scale, read_rows, cli_rows) -> None:  # type: ignore[no-untyped-def]
    """The three tables, printed."""
    header = (
        f"{common.machine()}; {args.workers} workers x {args.calls:,} get_price_data calls on random days and symbols."
    )
    common.report(
        header,
        [
            "dataset",
            "made in; on disk",
            "first open ever: load + first call (builds); precomputed",
            "open / first call (one fresh process)",
            f"open ({args.workers} starting together)",
            f"PSS of {args.workers} workers (node total)",
            "USS per worker beyond idle",
        ],
        scale,
        None,
    )
    reads_header = (
        f"Reads on {args.sizes[0]}: p50 back to back / p50 with a {SWEEP_MB} MB cache-polluting sweep before each "
        "call; ratio = D.features / MarketStore, each way; "
        "D.features for get_price_data reads the same OHLCV and indicator expressions as bench_tools.py."
    )
    common.report(reads_header, ["read", "trade-data", "qlib D.features", "ratio"], read_rows, None)
    cold = f"Cold start of CLI commands (fresh process, median of {args.cli_runs})."
    common.report(cold, ["command", "wall"], cli_rows, None)


if __name__ == "__main__":
    main()
