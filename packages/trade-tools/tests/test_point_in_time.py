"""Every tool's text at T0 is identical when every bar after T0 is changed (real data, random days).

The perturbed dataset goes through the real import and load path, and its indicator table is
computed afresh from it, so precomputation is covered too.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_data.qlib_dir import DatasetMeta, read_calendar_file, read_instruments_file, write_dataset
from trade_data.store import MarketStore
from trade_data.testing import perturb_future
from trade_tools.episode import Episode
from trade_tools.indicators import INDICATORS
from trade_tools.tasks import day_task

ALPHA = ["KMID", "ROC20", "RSQR60", "CORD30", "Mean($close,5)/Ref($close,10)", "Std($volume,20)/Mean($volume,20)"]


def random_calls(pool: list[str], rng: np.random.Generator, n: int = 40) -> list[tuple[str, str]]:
    calls = []
    for _ in range(n):
        kind = rng.integers(4)
        symbol = str(rng.choice(pool))
        if kind == 0:
            names = list(rng.choice(INDICATORS, size=int(rng.integers(1, 8)), replace=False))
            args = {"symbol": symbol, "period": f"{int(rng.integers(1, 120))}d", "indicators": names}
            calls.append(("get_price_data", json.dumps(args)))
        elif kind == 1:
            index = str(rng.choice(["SH000300", "SH000905", "SH000001"]))
            calls.append(
                ("get_macro_indicators", json.dumps({"index": index, "period": f"{int(rng.integers(2, 120))}d"}))
            )
        elif kind == 2:
            symbols = list(rng.choice(pool, size=int(rng.integers(1, len(pool))), replace=False))
            calls.append(
                (
                    "compute_alpha_factor",
                    json.dumps({"expression": str(rng.choice(ALPHA)), "symbols": symbols, "period": "120d"}),
                )
            )
        else:
            side = str(rng.choice(["buy", "sell"]))
            calls.append(
                ("TakeAction", json.dumps({"type": side, "symbol": symbol, "amount": int(rng.integers(1, 30)) * 100}))
            )
    return calls  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_tool_texts_ignore_the_future(
    seed: int, real_store: MarketStore, real_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(seed)
    t0 = real_store.calendar[int(rng.integers(80, len(real_store.calendar) - 5))]
    table, members = perturb_future(real_table, read_instruments_file(sample_data / "csi300.txt"), t0, seed)
    out = write_dataset(
        table, tmp_path / "perturbed", meta=DatasetMeta(source="perturbed"),
        calendar=read_calendar_file(sample_data / "calendar.txt"), universes={"csi300": members},
    )  # fmt: skip
    perturbed = MarketStore.load(out)
    task = day_task(real_store, t0.date().isoformat(), pool_size=12, seed=seed)
    assert day_task(perturbed, t0.date().isoformat(), pool_size=12, seed=seed) == task
    original, changed = Episode.start(task, real_store), Episode.start(task, perturbed)
    assert changed.messages() == original.messages()
    for name, arguments in random_calls(task.pool, rng):
        assert changed.call(name, arguments) == original.call(name, arguments), (name, arguments)
    assert changed.model_dump() == original.model_dump() and original.internal_errors == 0
    later = real_store.shift(t0, 1).isoformat()  # the check can fail: the next day sees the change
    symbol = task.pool[0]
    next_day = {"symbol": symbol}
    assert Episode.start(task.model_copy(update={"date": later}), real_store).call("get_price_data", next_day) != (
        Episode.start(task.model_copy(update={"date": later}), perturbed).call("get_price_data", next_day)
    )
