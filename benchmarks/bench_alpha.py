"""compute_alpha_factor's engine on the real sample data, beside the same factor through pyqlib.

    python benchmarks/bench_alpha.py [--data ../shared/data/cn-csi300] [--calls 2000] [--qlib-calls 100]

Each call is one Alpha158 factor at a random T0 for a random 30-stock CSI300 pool. Ours is
``value_at_t0`` on columns already read, and the whole tool path ``columns_at(rows=lookback+1)``
plus ``value_at_t0``; qlib is ``D.features(pool, [expr], T0, T0)`` with kernels=1 (it extends the
window to the left by itself) and its default in-memory cache. Times are p50 / p99 per call.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import _common as common
import numpy as np

if TYPE_CHECKING:
    from trade_data.store import PointInTimeView

POOL = 30
FACTORS = ("KMID", "ROC20", "STD20", "RSQR60", "CORR20")


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
        f"{name} `{text}`", f"{e50:,.0f} / {e99:,.0f}", f"{t50:,.0f} / {t99:,.0f}",
        f"{q50:,.0f} / {q99:,.0f}", f"{q50 / t50:,.0f}x",
    )  # fmt: skip


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per factor through our engine")
    parser.add_argument("--qlib-calls", type=int, default=100, help="calls per factor through D.features")
    args = parser.parse_args()

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
