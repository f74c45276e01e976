"""The memorisation guard's cost per tool call on the real sample: plain, anonymized, and anonymized with
``--anonymize-noise 0.01`` (the first call of a stock on a noisy day computes its perturbed indicators).

    python benchmarks/bench_anonymize.py [--data ../shared/data/cn-csi300] [--calls 2000] [--write FILE]

Single process, one core; the same random real days (2019-2025), pools of 20 csi300 stocks and calls in each mode.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import _common as common
import numpy as np

MODES = {"plain": None, "anonymized": 0.0, "anonymized, noise 0.01": 0.01}
"""Mode -> ``anonymize_noise`` (None: not anonymized)."""


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per tool and mode")
    args = parser.parse_args()

    from trade_data.bar_tables import precompute
    from trade_data.store import MarketStore
    from trade_tools.episode import Episode, EpisodeSettings
    from trade_tools.sampler import day_task

    with tempfile.TemporaryDirectory() as tmp:
        dataset = common.import_sample(args.data, Path(tmp) / "cn")
        precompute(dataset)
        store = MarketStore.load(dataset)
        rng = np.random.default_rng(0)
        days = [store.calendar[i].date().isoformat() for i in rng.integers(300, len(store.calendar), 100)]
        tasks = [day_task(store, d, pool_size=20, seed=i) for i, d in enumerate(days)]
        samples: dict[str, dict[str, list[int]]] = {}
        for mode, noise in MODES.items():
            episodes = [
                Episode.start(
                    t.model_copy(update={"anonymized": noise is not None}),
                    store,
                    settings=EpisodeSettings(anonymize_noise=noise or 0.0),
                )
                for t in tasks
            ]

            def shown(episode: Episode, symbol: str) -> str:
                return episode.aliases.symbols[symbol] if episode.aliases else symbol

            calls = {
                "get_price_data (default indicators)": lambda i, e: e.call(
                    "get_price_data", {"symbol": shown(e, e.task.pool[i % 20])}
                ),
                "get_macro_indicators": lambda i, e: e.call("get_macro_indicators", {}),
                "compute_alpha_factor (ROC20, 20 stocks)": lambda i, e: e.call(
                    "compute_alpha_factor", {"expression": "ROC20"}
                ),
            }
            for name, call in calls.items():
                picked = [(i, episodes[i % len(episodes)]) for i in range(args.calls)]
                samples.setdefault(name, {})[mode] = common.timed([lambda i=i, e=e, c=call: c(i, e) for i, e in picked])
    rows = []
    for name, by_mode in samples.items():
        cells = [f"{p50:,.0f} / {p99:,.0f} us" for p50, p99 in map(common.percentiles, by_mode.values())]
        rows.append((name, *cells))
    header = (
        f"{common.machine()} (one used); {args.calls:,} calls per tool and mode over 100 days' episodes (each stock "
        "called several times, as in a day); p50 / p99 per call including argument translation and text hiding."
    )
    common.report(header, ["call", *MODES], rows, args.write)


if __name__ == "__main__":
    main()
