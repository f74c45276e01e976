"""The llm policy's backtest against a local OpenAI-protocol server that answers every request after --latency
seconds (trade_eval.testing.FaultServer: real HTTP on 127.0.0.1, the model replaced by a script): days per
minute and requests in flight, for one backtest and for N backtests (seeds) side by side in one process.

    python benchmarks/bench_eval_server.py [--data ../shared/data/cn-csi300] [--latency 0.2] [--days 10]

Each day is --requests replies: tool calls (get_macro_indicators) and then TakeAction(stop), so a day takes at
least requests x latency however fast the harness is. A day needs the previous day's portfolio, so one
backtest has one request in flight at a time; runs with other seeds (or models) are independent.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
import time
from pathlib import Path

import _common as common

START = dt.date(2025, 6, 20)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds before the server answers a request")
    parser.add_argument("--days", type=int, default=10, help="trading days of each backtest")
    parser.add_argument("--requests", type=int, default=4, help="replies per day (the last one stops the day)")
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 4, 16, 64], help="backtests side by side")
    args = parser.parse_args()

    from trade_core.logging import configure_logging

    configure_logging(level="error")

    from trade_data.store import MarketStore
    from trade_eval.backtest import Backtest
    from trade_eval.policies.llm import LLMPolicy
    from trade_eval.policy import RunSettings
    from trade_eval.testing import FaultServer, stop_after

    script = stop_after(args.requests, args.latency)

    async def run(store: MarketStore, url: str, seed: int) -> int:
        settings = RunSettings(model="bench", base_url=url, seed=seed)
        backtest = Backtest(store, START, args.days, seed=seed)
        return sum([record.status == "done" async for record, _ in backtest.days(LLMPolicy(), settings)])

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = MarketStore.load(common.import_sample(args.data, Path(tmp) / "cn"))
        for runs in args.runs:
            with FaultServer(script) as server:
                started, cpu = time.perf_counter(), time.process_time()

                async def together(url: str = server.url, n: int = runs) -> list[int]:
                    return await asyncio.gather(*(run(store, url, seed) for seed in range(n)))

                done = sum(asyncio.run(together()))
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            days = runs * args.days
            assert done == days, f"{days - done} days failed"
            floor = args.requests * args.latency
            rows.append(
                (
                    str(runs),
                    f"{days / wall * 60:.1f}",
                    f"{wall / args.days:.2f} s",
                    f"{floor:.2f} s",
                    str(server.peak),
                    f"{len(server.requests) / wall:.1f}",
                    f"{cpu / days * 1e3:.0f} ms",
                )
            )
    header = (
        f"{common.machine()}; {args.days} trading days from {START} per backtest, pool of 20, {args.requests} "
        f"replies a day, the server answering each after {args.latency * 1e3:.0f} ms; N backtests (seeds 0..N-1) "
        "side by side in one process (asyncio)"
    )
    columns = [
        "backtests",
        "days/min (all)",
        "wall per day of a run",
        "latency floor per day",
        "peak requests in flight",
        "requests/s",
        "CPU per day (harness + server threads)",
    ]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
