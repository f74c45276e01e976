"""What the trading metrics and trajectory records add to one verl training step (the tutorial's step:
32 tasks x 8 rollouts), on one core: parsing the stored Episodes and conversations, the metrics, the records.

    python benchmarks/bench_train.py [--data ../shared/data/cn-csi300] [--tasks 32] [--rollouts 8] [--steps 5]
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import _common as common
import numpy as np


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    from trade_data.store import MarketStore
    from trade_reward.forward import ground_truth
    from trade_tools.day import TradingDay
    from trade_tools.sampler import day_task
    from trade_tools.trajectory import write_trajectories
    from trade_train.rollouts import step_metrics
    from trade_train.verl_grpo.schema import REWARD_INFO, compute_score, rollout

    with tempfile.TemporaryDirectory() as tmp:
        store = MarketStore.load(common.import_sample(args.data, Path(tmp) / "cn"))
        rng = np.random.default_rng(0)
        stored = []  # what TransferQueue hands back per rollout: (group, score, extra_fields)
        for t in range(args.tasks):
            day = store.calendar[int(rng.integers(300, len(store.calendar) - 4))].date().isoformat()
            task = day_task(store, day, pool_size=10, seed=t)
            truth = ground_truth(store, day, [*task.pool, *task.holdings]).model_dump_json()
            for _ in range(args.rollouts):
                trading = TradingDay.start(task, store)
                calls = [("get_price_data", {"symbol": s}) for s in rng.choice(task.pool, 3, replace=False)]
                calls += [
                    ("TakeAction", {"type": "buy", "symbol": str(task.pool[0]), "amount": 100}),
                    ("TakeAction", {"type": "stop", "reasoning": "bench"}),
                ]
                for name, arguments in calls:
                    trading.turn("<think>\n分析\n</think>\n\n", [(name, json.dumps(arguments))])
                episode = trading.episode
                conversation = [m.model_dump(exclude_none=True) for m in trading.messages]
                reward = compute_score("trade", "", truth, {"episode": episode.model_dump_json()})
                fields = {"episode": episode.model_dump_json(), "conversation": json.dumps(conversation)}
                stored.append((f"uid-{t}", reward.pop("score"), {**fields, REWARD_INFO: reward}, truth))

        parse, metrics, records = [], [], []
        for step in range(args.steps):
            start = time.perf_counter()
            rollouts = [rollout(*row) for row in stored]
            parse.append(time.perf_counter() - start)
            start = time.perf_counter()
            step_metrics(rollouts)
            metrics.append(time.perf_counter() - start)
            start = time.perf_counter()
            write_trajectories(
                Path(tmp) / "trajectories" / f"{step}.jsonl", (r.trajectory(step=step) for r in rollouts)
            )
            records.append(time.perf_counter() - start)
        size = (Path(tmp) / "trajectories" / "0.jsonl").stat().st_size

    n = len(stored)
    header = (
        f"{common.machine()} (one used); one step = {args.tasks} tasks x {args.rollouts} rollouts = {n} trajectories "
        f"on random real days (3 price calls, a buy, stop); median of {args.steps} steps; records {size / 1e6:.1f} MB"
    )
    rows = [
        (what, f"{np.median(times) * 1e3:.1f} ms", f"{np.median(times) / n * 1e6:.0f} us")
        for what, times in [
            ("parse Episodes + conversations (verl_grpo.schema.rollout)", parse),
            ("trade/... metrics (step_metrics)", metrics),
            ("trajectory records, written atomically", records),
        ]
    ]
    common.report(header, ["per step", "time", "per trajectory"], rows, args.write)


if __name__ == "__main__":
    main()
