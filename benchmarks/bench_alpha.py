"""compute_alpha_factor's engine on the real sample data, beside the same factor through pyqlib;
or, with ``--cap``, the costliest calls its per-call work cap admits.

    python benchmarks/bench_alpha.py [--data ../shared/data/cn-csi300] [--calls 2000] [--qlib-calls 100]
    python benchmarks/bench_alpha.py --cap [--data ../shared/data/cn-csi300]

Each call is one Alpha158 factor at a random T0 for a random 30-stock CSI300 pool. Ours is
``value_at_t0`` on columns already read, and the whole tool path ``columns_at(rows=lookback+1)``
plus ``value_at_t0``; qlib is ``D.features(pool, [expr], T0, T0)`` with kernels=1 (it extends the
window to the left by itself) and its default in-memory cache. Times are p50 / p99 per call.

With ``--cap``, for each windowed operator and pools of 30 and 300 stocks: the operator nested in
``Ref(..., 250)`` with the window and nesting that give the most work ``MAX_WORK`` admits, called
through ``Episode.call`` in a fresh process. A one-stock ``$close`` call first loads the tools
(timed apart: a process pays it once); cold is then the first call of the expression, warm the
median of five more; memory is tracemalloc's peak over one more call (numpy reports its buffers to
it) and the growth of the process's peak RSS over the cold call (the peak is reset just before it).
Also the issue's worst expression at the most stocks admitted, and refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING

import _common as common
import numpy as np

if TYPE_CHECKING:
    from trade_data.store import PointInTimeView

POOL = 30
FACTORS = ("KMID", "ROC20", "STD20", "RSQR60", "CORR20")
CAP_POOLS = (30, 300)
CAP_DAY = "2025-12-31"
ISSUE_WORST = "Corr(Ref(Var(Cov($close,$high,250),250),200),$close,200)"


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
    engine = common.timed([lambda c=c: value_at_t0(node, c) for c in read])
    tool = common.timed([lambda v=v, p=p: value_at_t0(node, columns_at(v, p, rows=need)) for v, p in calls])
    theirs = common.timed(
        [lambda v=v, p=p: D.features(p, [text], start_time=v.date, end_time=v.date) for v, p in calls[:qlib_calls]]
    )
    (e50, e99), (t50, t99), (q50, q99) = map(common.percentiles, (engine, tool, theirs))
    return (
        f"{name} `{text}`",
        f"{e50:,.0f} / {e99:,.0f}",
        f"{t50:,.0f} / {t99:,.0f}",
        f"{q50:,.0f} / {q99:,.0f}",
        f"{q50 / t50:,.0f}x",
    )


def costliest(operator: str, stocks: int) -> tuple[int, str]:
    """(work, expression): ``operator`` nested in Refs of 250 days, with the most work the cap admits for ``stocks``."""
    from trade_tools.expression import MAX_WINDOW, PAIR_WINDOWED

    def shape(window: int, depth: int) -> str:
        inner = "$close, $volume" if operator in PAIR_WINDOWED else "$close"
        text = f"{operator}({inner}, {window}{', 0.5' if operator == 'Quantile' else ''})"
        for _ in range(depth):
            text = f"Ref({text}, 250)"
        return text

    return max(
        (_admitted(shape(window, depth), stocks), shape(window, depth))
        for window in range(1, MAX_WINDOW + 1)
        for depth in range(8)
    )


def _admitted(text: str, stocks: int) -> int:
    """The call's work units if the cap admits ``text`` over ``stocks`` stocks, else 0."""
    from trade_tools.expression import MAX_WORK, ExpressionError, parse_expression, work

    try:
        units = work(parse_expression(text)) * stocks
    except ExpressionError:
        return 0
    return units if units <= MAX_WORK else 0


def probe(dataset: Path, text: str, stocks: int) -> dict[str, float | str]:
    """Calls of ``text`` over ``stocks`` stocks in a fresh process: cold and warm time, traced and RSS peaks."""
    request = json.dumps([str(dataset), text, stocks])
    done = subprocess.run([sys.executable, __file__, "--probe", request], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def _probe(dataset: str, text: str, stocks: int) -> None:
    from trade_data.store import MarketStore
    from trade_data.symbols import Board, board_of
    from trade_tools.episode import Episode, Task

    store = MarketStore.load(Path(dataset))
    view = store.asof(CAP_DAY)
    pool = [s for s in store.symbols if board_of(s) is not Board.INDEX and view.knows(s)][:stocks]
    day = Episode.start(Task(task_id="cap", date=view.date, pool=pool, cash=1e6), store)
    start = time.perf_counter()
    day.call("compute_alpha_factor", {"expression": "$close", "symbols": pool[:1]})
    setup = time.perf_counter() - start
    call = {"expression": text, "symbols": pool}
    before = _kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets the peak RSS (VmHWM) to the current RSS
    start = time.perf_counter()
    answer = day.call("compute_alpha_factor", call)
    cold = time.perf_counter() - start
    rss = _kib("VmHWM") - before
    warm = common.percentiles(common.timed([lambda: day.call("compute_alpha_factor", call)] * 5))[0]
    tracemalloc.start()
    day.call("compute_alpha_factor", call)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    seen = {"setup_ms": setup * 1e3, "cold_ms": cold * 1e3, "warm_ms": warm / 1e3, "traced_mb": traced / 2**20}
    print(json.dumps({**seen, "rss_mb": rss / 1024, "answer": answer.splitlines()[0][:60]}))


def _kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))  # type: ignore[union-attr]


def cap_rows(dataset: Path) -> tuple[list[tuple[str, ...]], float]:
    """One row per (operator, pool size) at the cap, then the issue's worst expression admitted and refused;
    and the median time a fresh process takes to load the tools on its first call (ms)."""
    from trade_tools.expression import MAX_WORK, PAIR_WINDOWED, WINDOWED, parse_expression, work

    calls = [(op, *costliest(op, n), n) for op in sorted(WINDOWED | PAIR_WINDOWED | {"Quantile"}) for n in CAP_POOLS]
    each = work(parse_expression(ISSUE_WORST))
    calls += [("issue", MAX_WORK // each * each, ISSUE_WORST, MAX_WORK // each)]
    calls += [("refused", 0, ISSUE_WORST, n) for n in CAP_POOLS]
    rows, setups = [], []
    for label, units, text, stocks in calls:
        seen = probe(dataset, text, stocks)
        setups.append(float(seen["setup_ms"]))
        rows.append(
            (
                label,
                f"`{text}`",
                str(stocks),
                f"{units:,}",
                f"{seen['cold_ms']:.1f}",
                f"{seen['warm_ms']:.1f}",
                f"{seen['traced_mb']:.1f}",
                f"{seen['rss_mb']:.1f}",
                str(seen["answer"]).split("（")[0],
            )
        )
    return rows, float(np.median(setups))


def main() -> None:
    if sys.argv[1:2] == ["--probe"]:  # one measurement in a fresh process, for probe()
        _probe(*json.loads(sys.argv[2]))
        return
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per factor through our engine")
    parser.add_argument("--qlib-calls", type=int, default=100, help="calls per factor through D.features")
    parser.add_argument("--cap", action="store_true", help="measure the costliest calls the per-call cap admits")
    args = parser.parse_args()
    if args.cap:
        from trade_tools.expression import MAX_WORK

        with tempfile.TemporaryDirectory() as tmp:
            rows, setup = cap_rows(common.import_sample(args.data, Path(tmp) / "cn"))
        header = (
            f"{common.machine()}; compute_alpha_factor through Episode.call on {CAP_DAY}, cap {MAX_WORK:,} work units "
            f"per call. A fresh process's first tool call loads the tools once ({setup:.0f} ms, median); then cold = "
            "first call of the expression, warm = median of 5 more (ms); traced = tracemalloc peak, RSS = growth of "
            "peak RSS over the cold call (MB)."
        )
        columns = ["operator", "expression", "stocks", "units", "cold", "warm", "traced", "RSS", "answer"]
        common.report(header, columns, rows, args.write)
        return

    import qlib
    from qlib.contrib.data.loader import Alpha158DL

    from trade_data.store import MarketStore

    with tempfile.TemporaryDirectory() as tmp:
        dataset = common.import_sample(args.data, Path(tmp) / "cn")
        store = MarketStore.load(dataset)
        qlib.init(provider_uri=str(dataset), region="cn", kernels=1)
        rng = np.random.default_rng(0)
        views = [store.asof(store.calendar[i]) for i in rng.integers(120, len(store.calendar), args.calls)]
        pools = [list(rng.choice(v.members("csi300"), POOL, replace=False)) for v in views]
        fields, names = Alpha158DL.get_feature_config()
        texts = dict(zip(names, fields, strict=True))
        rows = [bench_factor(name, texts[name], views, pools, args.qlib_calls) for name in FACTORS]

    header = (
        f"{common.machine()}; {POOL}-stock pools at random T0s, {args.calls:,} calls per factor for ours, "
        f"{args.qlib_calls} for D.features; times in us, p50 / p99 per call; ratio = D.features p50 / tool path p50."
    )
    columns = ["factor", "value_at_t0", "columns_at + value_at_t0", "qlib D.features", "ratio"]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
