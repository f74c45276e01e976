"""The precomputed indicator table gives exactly what computing on the bars up to T0 gives, and the tool texts
are the same either way (checked on the real data for many symbols and days)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from trade_core.testing import run_trade
from trade_data.cache import cached_tables
from trade_data.store import MarketStore
from trade_tools.episode import Episode, Task
from trade_tools.indicators import INDICATOR_TABLE, INDICATORS, _table_rows, latest


def _pairs(store: MarketStore, count: int, seed: int) -> list[tuple[int, str]]:
    """Random (day, symbol) pairs, early days (short histories) and suspended symbols included."""
    rng = np.random.default_rng(seed)
    days = rng.integers(0, len(store.calendar), count)
    return [(int(t), store.symbols[int(rng.integers(0, len(store.symbols)))]) for t in days]


@pytest.mark.slow
def test_table_rows_equal_the_computation_on_the_bars_up_to_t0(sample_store: MarketStore) -> None:
    compared = 0
    for t, symbol in _pairs(sample_store, 400, seed=1):
        view = sample_store.asof(sample_store.calendar[t])
        if not view.knows(symbol):
            continue
        bars = view.window(symbol, view.index + 1)
        expected = _table_rows(bars)[-1] if len(bars) else np.full(len(INDICATORS), np.nan, dtype=np.float32)
        got = np.array([latest(view, symbol)[name] for name in INDICATORS], dtype=np.float32)
        assert np.array_equal(got, expected, equal_nan=True), (symbol, view.date)
        compared += 1
    assert compared > 300
    rows = sample_store.bar_tables.rows(INDICATOR_TABLE)
    assert isinstance(rows.base, np.memmap) and rows.shape == (sample_store.traded_offsets[-1], len(INDICATORS))


def test_price_texts_are_the_same_from_the_table_and_from_the_bars(
    sample_store: MarketStore, sample_dataset: Path
) -> None:
    pairs = [
        (t, s) for t, s in _pairs(sample_store, 60, seed=2) if sample_store.asof(sample_store.calendar[t]).knows(s)
    ]
    args = [{"symbol": s, "period": f"{k + 1}d", "indicators": list(INDICATORS)} for k, (_, s) in enumerate(pairs)]
    tasks = [Task(task_id="t", date=sample_store.calendar[t].date(), pool=[s], holdings={}, cash=1e6) for t, s in pairs]
    pairs_of_calls = list(zip(tasks, args, strict=True))
    from_table = [Episode.start(task, sample_store).call("get_price_data", a) for task, a in pairs_of_calls]
    other = MarketStore.load(sample_dataset)
    episodes = [Episode.start(task, other) for task in tasks]
    del other
    gc.collect()  # the views outlive their store: indicators are computed from their bars
    assert all(e.view._past.bar_tables() is None for e in episodes)
    from_bars = [e.call("get_price_data", a) for e, a in zip(episodes, args, strict=True)]
    assert from_table == from_bars
    assert sum("技术指标" in text for text in from_table) > 40


@pytest.mark.slow
def test_a_dataset_the_cli_writes_has_its_indicator_table_before_the_first_call(tmp_path: Path) -> None:
    """`trade data synth` builds the registered bar tables with the dataset: the first tool call of a fresh
    process opens them and builds nothing."""
    out = tmp_path / "synth"
    made = run_trade(
        "data", "synth", "--out", str(out), "--symbols", "12", "--start", "2020-01-01", "--end", "2020-12-31"
    )
    assert made.code == 0, made.err
    built = cached_tables(out)
    assert any(name.startswith(f"table-{INDICATOR_TABLE.name}-") for name, _ in built), built
    store = MarketStore.load(out)
    symbol = next(s for s in store.symbols if not s.startswith(("SH000", "SZ399")))
    base = ["--data", str(out), "--date", "2020-12-31", "--pool", symbol]
    run = run_trade("tools", "call", "get_price_data", *base, "--args", f'{{"symbol": "{symbol}"}}')
    assert run.code == 0 and "computing" not in run.err, run.err
    assert cached_tables(out) == built
