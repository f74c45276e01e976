"""The memory-mapped store: the same values as the whole-market in-memory computation, built once per dataset
version, rebuilt when the data changes, safe for concurrent first openers, shared between processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_data.cache import CACHE_FOLDER, cached_tables
from trade_data.columns import limit_hits, raw_prices, round_cents, shares
from trade_data.info import dataset_info
from trade_data.qlib_dir import META_FILE, member_days, read_feature, read_meta, read_universe
from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of, limit_fractions
from trade_data.synth import write_synthetic_market


def reference_arrays(store: MarketStore) -> dict[str, np.ndarray]:
    """Every array as MarketStore computed it in memory before the cache (whole market at once)."""
    days, n = len(store.calendar), len(store.symbols)
    stored = {name: np.full((days, n), np.nan) for name in ("open", "high", "low", "close", "volume", "factor")}
    for j, symbol in enumerate(store.symbols):
        for name in stored:
            start, values = read_feature(store.path, symbol, name)
            stored[name][start : start + values.size, j] = values
    factor = stored["factor"]
    found = {f"adjusted_{name}": stored[name] for name in ("open", "high", "low", "close")}
    is_stock = np.array([board_of(s) is not Board.INDEX for s in store.symbols])
    for name in ("open", "high", "low", "close"):
        raw = stored[name] / factor
        raw[:, is_stock] = round_cents(raw[:, is_stock])
        found[f"raw_{name}"] = raw
    volume = np.round(stored["volume"] * factor)
    traded = volume > 0
    previous = pd.DataFrame(np.where(traded, stored["close"], np.nan)).ffill().shift(1).to_numpy()
    up, down = limit_hits(found["raw_close"], previous, factor, limit_fractions(store.symbols, store.calendar.date))
    has_bar = ~np.isnan(stored["close"])
    found.update(
        volume=volume,
        stored_volume=stored["volume"],
        factor=factor,
        traded=traded,
        previous_close=previous,
        limit_up=up & traded,
        limit_down=down & traded,
        traded_by=np.cumsum(traded, axis=0, dtype=np.int32),
        first_day=np.where(has_bar.any(axis=0), has_bar.argmax(axis=0), days),
    )
    found["member-all"] = np.arange(days)[:, None] >= found["first_day"][None, :]
    for universe in store.universe_names[1:]:
        found[f"member-{universe}"] = member_days(read_universe(store.path, universe), store.calendar, store.symbols)
    return found


def _read(store: MarketStore, name: str) -> np.ndarray:
    """The store's whole array ``name`` as the reference names it: stored, or derived as reads derive it."""
    if name.startswith("raw_"):
        return raw_prices(store.adjusted[name.removeprefix("raw_")], store.factor, store.is_stock)
    if name == "volume":
        return shares(store.stored_volume, store.factor)
    if name == "traded_by":
        return store._arrays["traded_by"].T  # kept [symbol, day]
    return store._arrays[name]


def _assert_same(store: MarketStore) -> None:
    """Every array equals the float64 computation: the float32 ones hold its values exactly, the derived ones are it
    to the bit, and the views read it."""
    expected = reference_arrays(store)
    for name, values in expected.items():
        got = _read(store, name)
        assert got.shape == values.shape and (got.dtype.kind == "u" or got.dtype.kind == values.dtype.kind), name
        assert np.array_equal(got.astype(values.dtype), values, equal_nan=values.dtype.kind == "f"), name
    for j, rows in enumerate(store._traded_rows):
        assert np.array_equal(rows, np.flatnonzero(expected["traded"][:, j]))
    day = store.asof(store.calendar[-1])
    for symbol in day.symbols()[:: max(1, len(day.symbols()) // 20)]:
        j, bars = store.column[symbol], day.window(symbol, 60, adjusted=False)
        rows = np.searchsorted(store.dates, bars.dates)
        assert bars.close.dtype == np.float64 and np.array_equal(bars.close, expected["raw_close"][rows, j]), symbol
        assert np.array_equal(bars.volume, expected["volume"][rows, j]), symbol


def test_views_find_the_traded_rows_up_to_t0(sample_store: MarketStore) -> None:
    rng = np.random.default_rng(4)
    for t in rng.integers(0, len(sample_store.calendar), 40):
        view = sample_store.asof(sample_store.calendar[t])
        for symbol in rng.choice(view.symbols(), 10):
            rows = np.flatnonzero(sample_store.traded[: t + 1, sample_store.column[symbol]])
            for n in (1, 20, 5000):
                assert np.array_equal(view.window(symbol, n).dates, sample_store.dates[rows[-n:]])
            assert view.last_traded_index(symbol) == (int(rows[-1]) if rows.size else None)


def test_views_of_days_with_the_same_listings_share_one_symbol_table(sample_store: MarketStore) -> None:
    last, before = sample_store.asof(sample_store.calendar[-1]), sample_store.asof(sample_store.calendar[-2])
    assert last._past.column is before._past.column


def test_real_store_arrays_equal_the_in_memory_computation(sample_store: MarketStore) -> None:
    _assert_same(sample_store)
    mapped = sample_store.adjusted["close"]
    assert isinstance(mapped.base, np.memmap) and not mapped.flags.writeable


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_synthetic_market(tmp_path / "m", symbols=12, start="2020-01-01", end="2020-12-31", seed=3)


def test_arrays_are_built_once_and_reused(small: Path) -> None:
    MarketStore.load(small)
    built = cached_tables(small)
    assert [name.split("-")[0] for name, _ in built] == ["store", "summary"]
    stamp = (small / CACHE_FOLDER / built[0][0] / "adjusted_close.npy").stat().st_mtime_ns
    _assert_same(MarketStore.load(small))
    assert cached_tables(small) == built
    assert (small / CACHE_FOLDER / built[0][0] / "adjusted_close.npy").stat().st_mtime_ns == stamp


def unstamp(dataset: Path) -> None:
    """Leave ``trade.json`` as datasets were written before writers stamped them."""
    meta = json.loads((dataset / META_FILE).read_text())
    del meta["stamp"]
    (dataset / META_FILE).write_text(json.dumps(meta))


def test_a_stamped_dataset_is_keyed_by_its_stamp_not_by_its_feature_files(small: Path) -> None:
    """Opening a written dataset reads no feature folder (38,521 files in the whole market): its writer's stamp names
    the version, and every write stamps anew."""
    MarketStore.load(small)
    built = cached_tables(small)
    for path in (small / "features").rglob("*.bin"):
        os.utime(path, ns=(1, 1))
    assert MarketStore.load(small).fingerprint == MarketStore.load(small).fingerprint
    assert cached_tables(small) == built
    stamp = read_meta(small).stamp
    write_synthetic_market(small, symbols=12, start="2020-01-01", end="2020-12-31", seed=3)
    assert len(read_meta(small).stamp) == 32 and read_meta(small).stamp != stamp


def test_a_changed_feature_file_rebuilds_the_arrays_of_an_unstamped_dataset(small: Path) -> None:
    unstamp(small)
    before = MarketStore.load(small)
    symbol = before.symbols[5]
    path = small / "features" / symbol.lower() / "close.day.bin"
    values = np.fromfile(path, dtype="<f4")
    values[-1] *= 1.5
    values.tofile(path)
    after = MarketStore.load(small)
    assert after.adjusted["close"][-1, 5] == pytest.approx(before.adjusted["close"][-1, 5] * 1.5, rel=1e-6)
    assert len(cached_tables(small)) == 2  # the store and the summary: the stale builds are gone
    _assert_same(after)


def test_a_synth_over_the_dataset_rebuilds_the_arrays(small: Path) -> None:
    before = MarketStore.load(small)
    write_synthetic_market(small, symbols=14, start="2020-01-01", end="2020-12-31", seed=4)
    after = MarketStore.load(small)
    assert len(after.symbols) == len(before.symbols) + 2
    _assert_same(after)


OPEN_AND_SUM = (
    "import sys, numpy; from trade_data.store import MarketStore; "
    "print(float(numpy.nansum(MarketStore.load(sys.argv[1]).adjusted['close'])))"
)


@pytest.mark.slow
def test_concurrent_first_openers_build_one_copy(small: Path) -> None:
    """Four fresh processes open a dataset never opened before, at once: one builds, the others wait and map it."""
    openers = [
        subprocess.Popen([sys.executable, "-c", OPEN_AND_SUM, str(small)], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    sums = {opener.communicate(timeout=300)[0].strip().splitlines()[-1] for opener in openers}  # after any log lines
    assert [opener.returncode for opener in openers] == [0] * 4 and len(sums) == 1
    assert len(cached_tables(small)) == 2
    assert not [p for p in (small / CACHE_FOLDER).iterdir() if ".tmp-" in p.name]
    _assert_same(MarketStore.load(small))


def test_a_dataset_that_cannot_hold_the_cache_uses_trade_cache_dir(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRADE_CACHE_DIR", str(tmp_path / "cache"))
    (small / CACHE_FOLDER).write_text("not a folder")  # as a read-only dataset: the folder cannot be made there
    _assert_same(MarketStore.load(small))
    assert list((tmp_path / "cache").glob("*/store-*/adjusted_close.npy"))


def test_info_reports_size_on_disk_and_the_precomputed_tables(small: Path) -> None:
    before = dataset_info(small)
    assert before.precomputed == {} and before.bytes_on_disk > 0 and "none yet" in before.to_text()
    MarketStore.load(small)
    after = dataset_info(small)
    assert after.bytes_on_disk == before.bytes_on_disk and list(after.precomputed) == ["store", "summary"]
    assert f"precomputed store {after.precomputed['store'] / 1e6:,.1f} MB" in after.to_text()
