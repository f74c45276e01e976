"""trade-tools benchmarks on the real sample data: per-tool latency, scripted episodes per second,
and the same information calls made the reference way (one ``qlib.data.D.features`` per call).

    python benchmarks/bench_tools.py [--data ../shared/data/cn-csi300] [--calls 5000] [--write FILE]

Single process, one core; random real days (2019-2025) and random pools of 20 csi300 stocks.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import _common as common
import numpy as np

INDICATORS = ["MA5", "MA20", "MACD_DIF", "RSI_14", "VOL_20", "BOLL_UPPER"]
# what the reference computes per get_price_data call, as Qlib expressions
REFERENCE_FIELDS = [
    "$open",
    "$high",
    "$low",
    "$close",
    "$volume",
    "Mean($close,5)",
    "Mean($close,20)",
    "EMA($close,12)-EMA($close,26)",
    "Std($close/Ref($close,1)-1,20)",
    "Mean($close,20)+2*Std($close,20)",
]


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="calls per tool")
    parser.add_argument("--episodes", type=int, default=2000, help="scripted episodes")
    parser.add_argument("--qlib-calls", type=int, default=200)
    args = parser.parse_args()

    import qlib
    from qlib.data import D

    from trade_data.bar_tables import precompute
    from trade_data.store import MarketStore
    from trade_tools.episode import Episode
    from trade_tools.sampler import day_task

    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        dataset = common.import_sample(args.data, Path(tmp) / "cn")
        start = time.perf_counter()
        precompute(dataset)  # the store's arrays and the indicators' tables, once per dataset version
        built = time.perf_counter() - start
        store = MarketStore.load(dataset)
        rows.append(
            ("derived tables (store, indicator states and bands; once per dataset)", f"{built:.2f} s", "-", "-")
        )
        rng = np.random.default_rng(0)
        days = [store.calendar[i].date().isoformat() for i in rng.integers(300, len(store.calendar), 200)]
        tasks = [day_task(store, d, pool_size=20, seed=i) for i, d in enumerate(days)]
        episodes = [Episode.start(t, store) for t in tasks]

        def pick(i: int) -> tuple[Episode, str]:
            episode = episodes[i % len(episodes)]
            return episode, episode.task.pool[i % len(episode.task.pool)]

        price = [
            (e, json.dumps({"symbol": s, "period": "20d", "indicators": INDICATORS}))
            for e, s in map(pick, range(args.calls))
        ]
        macro = [(episodes[i % 200], json.dumps({"index": "SH000300", "period": "20d"})) for i in range(args.calls)]
        alpha = [
            (episodes[i % 200], json.dumps({"expression": "ROC20", "symbols": episodes[i % 200].task.pool}))
            for i in range(args.calls)
        ]
        ours = {
            "get_price_data (6 indicators)": common.timed(
                [lambda e=e, a=a: e.call("get_price_data", a) for e, a in price]
            ),
            "get_macro_indicators": common.timed(
                [lambda e=e, a=a: e.call("get_macro_indicators", a) for e, a in macro]
            ),
            "compute_alpha_factor (ROC20, 20 stocks)": common.timed(
                [lambda e=e, a=a: e.call("compute_alpha_factor", a) for e, a in alpha]
            ),
        }
        # TakeAction on fresh episodes so orders keep filling; refused ones are equally fast paths
        fresh = [Episode.start(tasks[i % 200], store) for i in range(args.calls)]
        orders = [json.dumps({"type": "buy", "symbol": e.task.pool[0], "amount": 100}) for e in fresh]
        ours["TakeAction (buy)"] = common.timed(
            [lambda e=e, a=a: e.call("TakeAction", a) for e, a in zip(fresh, orders, strict=True)]
        )

        def scripted(task) -> None:  # type: ignore[no-untyped-def]
            episode = Episode.start(task, store)
            episode.messages()
            pool = task.pool
            for symbol in pool[:3]:
                episode.call("get_price_data", {"symbol": symbol, "indicators": INDICATORS})
            episode.call("get_macro_indicators", {"index": "SH000300"})
            episode.call("get_macro_indicators", {"index": "SH000905"})
            episode.call("compute_alpha_factor", {"expression": "ROC20", "symbols": pool})
            for symbol in pool[3:6]:
                episode.call("TakeAction", {"type": "buy", "symbol": symbol, "amount": 100})
            episode.call("TakeAction", {"type": "stop", "reasoning": "done"})

        start = time.perf_counter()
        for i in range(args.episodes):
            scripted(tasks[i % 200])
        per_second = args.episodes / (time.perf_counter() - start)

        qlib.init(provider_uri=str(dataset), region="cn", kernels=1)
        cal = store.calendar
        n = args.qlib_calls

        def reference_price(episode: Episode, symbol: str) -> None:
            t = episode.view.index
            D.features([symbol], REFERENCE_FIELDS, start_time=cal[max(0, t - 120)], end_time=cal[t])

        def reference_macro(episode: Episode) -> None:
            t = episode.view.index
            D.features(["SH000300"], ["$close", "$volume"], start_time=cal[max(0, t - 40)], end_time=cal[t])

        def reference_alpha(episode: Episode) -> None:
            t = episode.view.index
            D.features(episode.task.pool, ["$close/Ref($close,20)-1"], start_time=cal[max(0, t - 60)], end_time=cal[t])

        theirs = {
            "get_price_data (6 indicators)": common.timed(
                [lambda e=e, s=s: reference_price(e, s) for e, s in map(pick, range(n))]
            ),
            "get_macro_indicators": common.timed([lambda e=e: reference_macro(e) for e in episodes[:n]]),
            "compute_alpha_factor (ROC20, 20 stocks)": common.timed(
                [lambda e=e: reference_alpha(e) for e in episodes[:n]]
            ),
        }
        for name, samples in ours.items():
            p50, p99 = common.percentiles(samples)
            if name in theirs:
                q50, q99 = common.percentiles(theirs[name])
                rows.append((name, f"{p50:,.0f} / {p99:,.0f} us", f"{q50:,.0f} / {q99:,.0f} us", f"{q50 / p50:,.0f}x"))
            else:
                rows.append((name, f"{p50:,.0f} / {p99:,.0f} us", "-", "-"))
        reference_episode = sum(np.median(theirs[k]) for k in theirs) * 2 / 1e9  # 6 info calls = 2 of each kind
        rows.append(
            (
                "scripted episode (6 info calls, 3 orders, stop)",
                f"{per_second:,.0f} episodes/s",
                f"{1 / reference_episode:,.1f} episodes/s (info calls only)",
                f"{per_second * reference_episode:,.0f}x",
            )
        )

    header = (
        f"{common.machine()} (one used); {args.calls:,} calls per tool, {args.qlib_calls} per D.features read, "
        f"{args.episodes:,} scripted episodes; p50 / p99 per call including argument parsing, validation and text "
        "formatting; ratio = reference p50 / ours."
    )
    common.report(header, ["what", "trade-tools", "reference (D.features per call)", "ratio"], rows, args.write)


if __name__ == "__main__":
    main()
