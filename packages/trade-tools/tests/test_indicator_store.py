"""The indicators read from the stored states and the last bars are, at every bar, what pandas computes on all the
bars up to T0 (as when every indicator of every bar was stored), and the tool texts are the same either way
(checked on the real data, or its stand-in, for many symbols and every one of their days)."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_core.testing import run_trade
from trade_data.cache import cached_tables
from trade_data.store import Bars, MarketStore
from trade_tools.episode import Episode, Task
from trade_tools.indicators import INDICATOR_STATES, INDICATORS, latest


def whole_history_indicators(bars: Bars) -> np.ndarray:
    """Every indicator at every bar, float32, computed by pandas over all the bars (how they were defined and stored
    before the states table): the rolling ones by its running windows, the recursive ones by its ``ewm``."""
    close, high, low, volume = (pd.Series(getattr(bars, name)) for name in ("close", "high", "low", "volume"))
    previous = close.shift(1)
    out = {f"MA{n}": close.rolling(n).mean() for n in (5, 10, 20, 60)}
    ema12, ema26 = close.ewm(span=12, adjust=False).mean(), close.ewm(span=26, adjust=False).mean()
    dif = ema12 - ema26
    dea = dif.ewm(span=9, adjust=False).mean()
    std20 = close.rolling(20).std(ddof=0)
    true_range = pd.concat([high - low, (high - previous).abs(), (low - previous).abs()], axis=1).max(axis=1)
    change = close.diff()
    gain = change.clip(lower=0).ewm(alpha=1 / 14, adjust=False).mean()
    loss = (-change.clip(upper=0)).ewm(alpha=1 / 14, adjust=False).mean()
    out.update(
        EMA12=ema12,
        EMA26=ema26,
        VWAP=(close * volume).rolling(5).sum() / volume.rolling(5).sum(),
        MACD_DIF=dif,
        MACD_DEA=dea,
        MACD_HIST=2 * (dif - dea),
        BOLL_UPPER=out["MA20"] + 2 * std20,
        BOLL_MID=out["MA20"],
        BOLL_LOWER=out["MA20"] - 2 * std20,
        ATR_14=true_range.ewm(alpha=1 / 14, adjust=False).mean().where(np.arange(len(close)) >= 13),
        VOL_20=close.pct_change().rolling(20).std(),
        ROC_5=close / close.shift(5) - 1,
        ROC_20=close / close.shift(20) - 1,
        VOL_RATIO_5_20=volume.rolling(5).mean() / volume.rolling(20).mean(),
        RSI_14=(100 - 100 / (1 + gain / loss)).where(change.notna().cumsum() >= 14),
    )
    return np.column_stack([out[name].to_numpy() for name in INDICATORS]).astype(np.float32)


def _pairs(store: MarketStore, count: int, seed: int) -> list[tuple[int, str]]:
    """Random (day, symbol) pairs, early days (short histories) and suspended symbols included."""
    rng = np.random.default_rng(seed)
    days = rng.integers(0, len(store.calendar), count)
    return [(int(t), store.symbols[int(rng.integers(0, len(store.symbols)))]) for t in days]


def test_every_bar_reads_what_pandas_computes_on_the_whole_history(sample_store: MarketStore) -> None:
    """Each symbol's every traded day: the indicators a view reads (the recursive ones from a state kept every 16th
    bar, carried over the bars since; the bands stored; the rest from the last 61 bars) are to the bit pandas' over
    the whole history up to that day. ``TRADE_EVERY_SYMBOL=1``: every symbol of the dataset, not a sample."""
    store = sample_store
    last = store.asof(store.calendar[-1])
    rng = np.random.default_rng(7)
    stocks = [s for s in last.symbols() if s not in last.indices()]
    every = os.environ.get("TRADE_EVERY_SYMBOL") == "1"  # minutes, not seconds
    compared = 0
    for symbol in last.symbols() if every else [*rng.choice(stocks, 12, replace=False), *last.indices()]:
        history = last.window(symbol, len(store.calendar))
        expected = whole_history_indicators(history)
        for k, date in enumerate(history.dates):
            view = store.asof(pd.Timestamp(date).date())
            got = np.array([latest(view, symbol)[name] for name in INDICATORS], dtype=np.float32)
            assert np.array_equal(got, expected[k], equal_nan=True), (symbol, view.date, got, expected[k])
            compared += 1
    print(f"{compared:,} bars of {store.path.name}: every indicator equal")
    assert compared > 2000
    rows = store.bar_tables.rows(INDICATOR_STATES)
    kept = -(-np.diff(store.traded_offsets) // INDICATOR_STATES.every)
    assert isinstance(rows.base, np.memmap) and rows.shape == (kept.sum(), len(INDICATOR_STATES.columns))


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
    assert any(name.startswith(f"table-{INDICATOR_STATES.name}-") for name, _ in built), built
    store = MarketStore.load(out)
    symbol = next(s for s in store.symbols if not s.startswith(("SH000", "SZ399")))
    base = ["--data", str(out), "--date", "2020-12-31", "--pool", symbol]
    run = run_trade("tools", "call", "get_price_data", *base, "--args", f'{{"symbol": "{symbol}"}}')
    assert run.code == 0 and "computing" not in run.err, run.err
    assert cached_tables(out) == built


def test_the_derived_tables_are_at_most_twice_the_bars(sample_dataset: Path, sample_store: MarketStore) -> None:
    """Everything a written dataset derives (the store's arrays, the summary's and the indicators' tables) takes at
    most twice the disk of the Qlib bars it is derived from (it took 6-7x when every value was float64 and every
    indicator of every bar was stored)."""
    sample_store.bar_tables.rows(INDICATOR_STATES)
    bars = sum(path.stat().st_size for path in (sample_dataset / "features").rglob("*.bin"))
    derived = sum(size for _, size in cached_tables(sample_dataset))
    assert {name.rsplit("-", 1)[0] for name, _ in cached_tables(sample_dataset)} >= {
        "store",
        "summary",
        "table-indicator-states",
        "table-indicator-bands",
    }
    assert derived <= 2 * bars, (derived, bars)
