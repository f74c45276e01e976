"""trade-eval benchmarks on the real sample data: the harness's cost per day (everything but the model) and
the baselines table every backtest computes, over the tutorial window (60 days from 2025-06-20, pool 20).

    python benchmarks/bench_eval.py [--data ../shared/data/cn-csi300] [--write FILE]

Cold: a freshly loaded MarketStore (no day's view built yet; the load itself, about 1 s, is not counted);
warm: the same days again on that store. Single process, one core.
"""

from __future__ import annotations

import datetime as dt
import gc
import tempfile
import time
from pathlib import Path

import _common as common

START, DAYS = dt.date(2025, 6, 20), 60
REPEATS = 3


def main() -> None:
    args = common.parser(__doc__).parse_args()

    from trade_core.logging import configure_logging

    configure_logging(level="warning")

    from trade_data.store import MarketStore
    from trade_eval.backtest import Backtest, compare, new_manifest, play_into
    from trade_eval.metrics import Conventions
    from trade_eval.policies.baselines import BASELINES, Hold
    from trade_eval.policy import RunSettings
    from trade_records.runfolder import open_run

    class PromptedHold(Hold):
        """hold, but rendering the day's system and user prompts as a model's day does."""

        reads_prompt = True

    def seconds(call) -> float:  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    rows: list[tuple[str, str, str]] = []

    def row(what: str, cold: float, warm: float, per_day: bool) -> None:
        unit = (lambda s: f"{s / DAYS * 1e3:.2f} ms/day") if per_day else (lambda s: f"{s:.3f} s")
        rows.append((what, unit(cold), unit(warm)))

    with tempfile.TemporaryDirectory() as tmp:
        dataset = common.import_sample(args.data, Path(tmp) / "cn")
        settings = RunSettings()

        def both(make_call) -> tuple[float, float]:  # type: ignore[no-untyped-def]
            """(cold, warm) seconds, the best of REPEATS fresh stores (the machine may be shared)."""
            samples = []
            for _ in range(REPEATS):
                plan = Backtest(MarketStore.load(dataset), START, DAYS)
                gc.collect()
                samples.append((seconds(make_call(plan)), seconds(make_call(plan))))
            return min(cold for cold, _ in samples), min(warm for _, warm in samples)

        row("hold, in memory (harness per day)", *both(lambda p: lambda: p.simulate(Hold(), settings)), True)
        folders = iter(range(1000))

        def to_folder(plan: Backtest):  # type: ignore[no-untyped-def]
            def call() -> None:
                out = Path(tmp) / f"run{next(folders)}"
                manifest = new_manifest(plan, "hold", settings, command=[], data=dataset, pool_file=None, pool_size=20)
                play_into(plan, Hold(), settings, out, open_run(out, manifest, resume=False), progress=False)

            return call

        row("hold, written to a run folder (fsync per line)", *both(to_folder), True)
        prompted = both(lambda p: lambda: p.simulate(PromptedHold(), settings))
        row("hold, rendering the prompts (a model's day)", *prompted, True)
        for cls in BASELINES:
            row(f"{cls.name}, 60 days in memory", *both(lambda p, c=cls: lambda: p.simulate(c(), settings)), False)

        def table(plan: Backtest):  # type: ignore[no-untyped-def]
            def call() -> None:
                records = plan.simulate(BASELINES[3](), settings)
                compare(plan, BASELINES[3](), settings, records, Conventions())

            return call

        row("the table: every baseline + CSI300 + metrics (summary.json)", *both(table), False)
    header = (
        f"{common.machine()} (one used); {DAYS} trading days from {START}, pool of 20, 1,000,000 CNY; cold = first "
        f"pass on a freshly loaded store, warm = the same days again; best of {REPEATS}"
    )
    common.report(header, ["what", "cold", "warm"], rows, args.write)


if __name__ == "__main__":
    main()
