"""The precomputed indicator table gives exactly what computing on the bars up to T0 gives, and the tool texts
are the same either way (checked on the real data for many symbols and days)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from trade_data.store import MarketStore
from trade_tools.episode import Episode, Task
from trade_tools.indicators import INDICATOR_TABLE, INDICATORS, _table_rows, latest


def _pairs(store: MarketStore, count: int, seed: int) -> list[tuple[int, str]]:
    """Random (day, symbol) pairs, early days (short histories) and suspended symbols included."""
    rng = np.random.default_rng(seed)
    days = rng.integers(0, len(store.calendar), count)
    return [(int(t), store.symbols[int(rng.integers(0, len(store.symbols)))]) for t in days]


@pytest.mark.slow
def test_table_rows_equal_the_computation_on_the_bars_up_to_t0(real_store: MarketStore) -> None:
    compared = 0
    for t, symbol in _pairs(real_store, 400, seed=1):
        view = real_store.asof(real_store.calendar[t])
        if not view.knows(symbol):
            continue
        bars = view.window(symbol, view.index + 1)
        expected = _table_rows(bars)[-1] if len(bars) else np.full(len(INDICATORS), np.nan, dtype=np.float32)
        got = np.array([latest(view, symbol)[name] for name in INDICATORS], dtype=np.float32)
        assert np.array_equal(got, expected, equal_nan=True), (symbol, view.date)
        compared += 1
    assert compared > 300
    rows = real_store.bar_tables.rows(INDICATOR_TABLE)
    assert isinstance(rows.base, np.memmap) and rows.shape == (real_store.traded_offsets[-1], len(INDICATORS))


def test_price_texts_are_the_same_from_the_table_and_from_the_bars(real_store: MarketStore, real_dataset: Path) -> None:
    pairs = [(t, s) for t, s in _pairs(real_store, 60, seed=2) if real_store.asof(real_store.calendar[t]).knows(s)]
    args = [{"symbol": s, "period": f"{k + 1}d", "indicators": list(INDICATORS)} for k, (_, s) in enumerate(pairs)]
    tasks = [Task(task_id="t", date=real_store.calendar[t].date(), pool=[s], holdings={}, cash=1e6) for t, s in pairs]
    pairs_of_calls = list(zip(tasks, args, strict=True))
    from_table = [Episode.start(task, real_store).call("get_price_data", a) for task, a in pairs_of_calls]
    other = MarketStore.load(real_dataset)
    episodes = [Episode.start(task, other) for task in tasks]
    del other
    gc.collect()  # the views outlive their store: indicators are computed from their bars
    assert all(e.view._past.bar_tables() is None for e in episodes)
    from_bars = [e.call("get_price_data", a) for e, a in zip(episodes, args, strict=True)]
    assert from_table == from_bars
    assert sum("技术指标" in text for text in from_table) > 40
