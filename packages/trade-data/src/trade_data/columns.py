"""MarketStore's [day, symbol] arrays, built from Qlib's per-symbol files in blocks of symbols.

Every array is computed column by column (a symbol's bars, flags and references depend on that
symbol only), so a block of symbols at a time is read, derived and written into ``.npy`` files
opened for writing as memory maps: memory stays bounded whatever the market's size.

Only what cannot be derived cheaply at read is kept, in the narrowest type that holds it exactly: Qlib's
stored float32 values as they are (adjusted prices, volume / factor, factor, and the adjusted close of the
last traded day before), the flags, and day indices in 16 bits where the calendar allows. Raw prices and
share counts are derived where they are read (:func:`raw_prices`, :func:`shares`), in float64 from the
float32 values, so they are to the last bit what was stored as float64 before: a store is about the size
of the bars it is built from, not five times it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.lib.format import open_memmap

from trade_data.cache import cached_arrays
from trade_data.qlib_dir import list_universes, member_days, read_feature, read_universe
from trade_data.symbols import PRICE_LIMITS, Board, board_of, limit_fractions

PRICE_FIELDS = ("open", "high", "low", "close")
_STORED = ("open", "high", "low", "close", "volume", "factor")
VERSION = f"store-3 {PRICE_LIMITS!r}"
"""Bump when a derived value changes; the limit table is part of it (the flags are derived from it)."""
_BLOCK = 256
_FLOAT = (*(f"adjusted_{n}" for n in PRICE_FIELDS), "stored_volume", "factor", "previous_close")
_BOOL = ("traded", "limit_up", "limit_down")


def _day_index_type(days: int) -> type[np.integer]:
    """The narrowest integer type that holds every day index and count of a calendar of ``days`` days."""
    return np.uint16 if days <= np.iinfo(np.uint16).max else np.int32


def round_cents(values: np.ndarray) -> np.ndarray:
    """Round half up to the cent, the way exchanges round prices (np.round rounds half to even)."""
    return np.floor(values * 100.0 + 0.5 + 1e-9) / 100.0


def raw_prices(adjusted: np.ndarray, factor: np.ndarray, is_stock: np.ndarray | bool) -> np.ndarray:
    """Prices as traded: Qlib's adjusted values over the factor, stocks' rounded to the cent (indices' are not),
    in float64 (float32 inputs are widened first, exactly)."""
    raw = np.divide(adjusted, factor, dtype=np.float64)  # float32 operands are widened exactly first
    if np.ndim(is_stock) == 0:  # one column: no mask to apply
        return round_cents(raw) if is_stock else raw
    return np.where(is_stock, round_cents(raw), raw)


def shares(stored_volume: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """Shares traded from Qlib's stored volume (shares / factor, float32), as float64 whole numbers."""
    return np.round(np.multiply(stored_volume, factor, dtype=np.float64))


def limit_hits(
    close: np.ndarray | float,
    previous_close: np.ndarray | float,
    factor: np.ndarray | float,
    fraction: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
    """Whether closes sit at the limit-up / limit-down price (arrays or single values; NaN anywhere: no).

    The reference is the last traded close, ex-right adjusted to today's factor and rounded to the cent;
    the limit price moves it by the board's fraction and is rounded again, as the exchanges do.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        reference = round_cents(previous_close / factor)
        up = close >= round_cents(reference * (1 + fraction)) - 1e-6
        down = close <= round_cents(reference * (1 - fraction)) + 1e-6
    return up, down


def store_arrays(
    dataset: Path, symbols: Sequence[str], calendar: pd.DatetimeIndex, *, fingerprint: str
) -> dict[str, np.ndarray]:
    """The store's arrays for ``dataset``, memory-mapped (built on the first open of this dataset version).

    [day, symbol]: ``adjusted_*`` prices, ``stored_volume`` (shares / factor), ``factor``, ``previous_close``
    (adjusted close of the last traded day before), all float32 as Qlib stores them; ``traded``, ``limit_up``,
    ``limit_down`` and ``member-<universe>`` (bool); [symbol, day] ``traded_by`` (traded days so far);
    per symbol ``first_day``; ``traded_rows`` (each symbol's traded day indices, concatenated) cut by
    ``traded_offsets``. ``fingerprint`` is :func:`~trade_data.cache.dataset_fingerprint` of ``dataset``.
    """
    return cached_arrays(
        dataset,
        "store",
        VERSION,
        lambda folder: _build(dataset, folder, list(symbols), calendar),
        fingerprint=fingerprint,
    )


def _build(dataset: Path, folder: Path, symbols: list[str], calendar: pd.DatetimeIndex) -> None:
    days, n = len(calendar), len(symbols)
    index_type = _day_index_type(days)
    out = {name: open_memmap(folder / f"{name}.npy", "w+", np.float32, (days, n)) for name in _FLOAT}
    out.update({name: open_memmap(folder / f"{name}.npy", "w+", np.bool_, (days, n)) for name in _BOOL})
    by_symbol = open_memmap(folder / "traded_by.npy", "w+", index_type, (n, days))
    first_day = np.empty(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    rows_file = folder / "traded_rows.bin"
    with open(rows_file, "wb") as rows_out:
        for begin in range(0, n, _BLOCK):
            block = symbols[begin : begin + _BLOCK]
            part = _derive(dataset, block, calendar)
            for name, values in part.items():
                if name in out:
                    out[name][:, begin : begin + len(block)] = values
            first_day[begin : begin + len(block)] = part["first_day"]
            by_symbol[begin : begin + len(block)] = part["traded_by"].T
            for k, rows in enumerate(part["traded_rows"]):
                offsets[begin + k + 1] = offsets[begin + k] + rows.size
                rows.astype(index_type).tofile(rows_out)
    for array in [*out.values(), by_symbol]:
        array.flush()
    del out, by_symbol
    np.save(folder / "first_day.npy", first_day)
    np.save(folder / "traded_offsets.npy", offsets)
    flat = open_memmap(folder / "traded_rows.npy", "w+", index_type, (int(offsets[-1]),))
    if flat.size:  # copied through the page cache, not held in memory
        flat[:] = np.memmap(rows_file, dtype=index_type, mode="r")
    flat.flush()
    rows_file.unlink()
    for universe in ["all", *list_universes(dataset)]:
        if universe == "all":
            matrix = np.arange(days)[:, None] >= first_day[None, :]
        else:
            matrix = member_days(read_universe(dataset, universe), calendar, symbols)
        np.save(folder / f"member-{universe}.npy", matrix)


def _derive(dataset: Path, symbols: list[str], calendar: pd.DatetimeIndex) -> dict:  # type: ignore[type-arg]
    """Every array of a block of symbols (their columns), as MarketStore derives them."""
    days, n = len(calendar), len(symbols)
    stored = {name: np.full((days, n), np.nan) for name in _STORED}
    for j, symbol in enumerate(symbols):
        for name in _STORED:
            start, values = read_feature(dataset, symbol, name)
            stored[name][start : start + values.size, j] = values
    factor = stored["factor"]
    part: dict[str, object] = {f"adjusted_{name}": stored[name] for name in PRICE_FIELDS}
    is_stock = np.array([board_of(s) is not Board.INDEX for s in symbols])
    traded = shares(stored["volume"], factor) > 0
    has_bar = ~np.isnan(stored["close"])
    # Adjusted close of the last traded day before each day: the reference for changes and limits.
    previous_close = pd.DataFrame(np.where(traded, stored["close"], np.nan)).ffill().shift(1).to_numpy()
    raw_close = raw_prices(stored["close"], factor, is_stock)
    up, down = limit_hits(raw_close, previous_close, factor, limit_fractions(symbols, calendar.date))
    part.update(
        stored_volume=stored["volume"],
        factor=factor,
        previous_close=previous_close,
        traded=traded,
        limit_up=up & traded,
        limit_down=down & traded,
        traded_by=np.cumsum(traded, axis=0, dtype=np.int32),
        first_day=np.where(has_bar.any(axis=0), has_bar.argmax(axis=0), days),
        traded_rows=[np.flatnonzero(traded[:, j]) for j in range(n)],
    )
    return part
