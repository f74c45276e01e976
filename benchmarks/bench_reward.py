"""Rewards for 10,000 finished episodes on one core, from Episode objects and through verl's
``compute_score`` (which also parses the Episode and ground-truth JSON, as verl's reward workers do).

    python benchmarks/bench_reward.py [--data ../shared/data/cn-csi300] [--episodes 10000]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import _common as common
import numpy as np


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--episodes", type=int, default=10_000)
    args = parser.parse_args()

    from trade_data.store import MarketStore
    from trade_reward.forward import ground_truth
    from trade_reward.outcome import outcome
    from trade_reward.schemes import get_scheme
    from trade_tools.episode import Episode
    from trade_tools.sampler import day_task
    from trade_train.verl_grpo.schema import compute_score

    with tempfile.TemporaryDirectory() as tmp:
        dataset = common.import_sample(args.data, Path(tmp) / "cn")
        store = MarketStore.load(dataset)
        rng = np.random.default_rng(0)
        episodes, truths = [], []
        for i in range(args.episodes):
            day = store.calendar[int(rng.integers(300, len(store.calendar) - 4))].date().isoformat()
            task = day_task(store, day, pool_size=10, seed=i)
            episode = Episode.start(task, store)
            for symbol in task.pool[:2]:
                episode.call("TakeAction", {"type": "buy", "symbol": symbol, "amount": 100 * int(rng.integers(1, 20))})
            for symbol in list(task.holdings)[:1]:
                episode.call("TakeAction", {"type": "sell", "symbol": symbol, "amount": task.holdings[symbol]})
            episode.call("TakeAction", {"type": "stop", "reasoning": "bench"})
            episodes.append(episode)
            truths.append(ground_truth(store, day, [*task.pool, *task.holdings]))
        scheme = get_scheme("bucketed")
        start = time.perf_counter()
        scores = [scheme.score(outcome(e, t)).score for e, t in zip(episodes, truths, strict=True)]
        objects = time.perf_counter() - start
        payloads = [
            ({"episode": e.model_dump_json()}, t.model_dump_json()) for e, t in zip(episodes, truths, strict=True)
        ]
        start = time.perf_counter()
        verl_scores = [compute_score("trade-agent/csi300", "", truth, extra)["score"] for extra, truth in payloads]
        through_json = time.perf_counter() - start
        assert scores == verl_scores

    n = args.episodes
    values, counts = np.unique(scores, return_counts=True)
    distribution = {float(v): int(c) for v, c in zip(values, counts, strict=True)}
    header = (
        f"{common.machine()} (one used); {n:,} finished episodes on random real days (2 buys, 1 sell, stop), "
        f"bucketed scheme; score distribution: {distribution}"
    )
    rows = [
        ("outcome + scheme from Episode objects", f"{objects:.3f} s", f"{objects / n * 1e6:.1f} us"),
        (
            "verl compute_score (parses Episode + ground-truth JSON)",
            f"{through_json:.3f} s",
            f"{through_json / n * 1e6:.1f} us",
        ),
    ]
    common.report(header, ["what", "total", "per episode"], rows, args.write)


if __name__ == "__main__":
    main()
