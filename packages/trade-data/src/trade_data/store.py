"""``MarketStore``: a dataset as memory-mapped (dates x symbols) arrays, read point in time.

Tool calls inside RL rollouts read bars thousands of times a second, so every read is an index
lookup into numpy arrays: memory-mapped from the dataset's precomputed files (:mod:`trade_data.columns`),
so every process on a node shares one copy. The arrays hold Qlib's float32 values; what a read returns is
float64, raw prices and share counts derived as it reads (the same values to the last bit). Reads happen through a
:class:`PointInTimeView` bound to a day T0: it only holds array slices that end at T0, so no
method can return anything dated after T0, whatever the caller asks for.
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from trade_data.bar_tables import BarTable, BarTables, TableRow
from trade_data.cache import dataset_fingerprint
from trade_data.columns import PRICE_FIELDS, limit_hits, raw_prices, round_cents, shares, store_arrays
from trade_data.errors import DatasetError
from trade_data.qlib_dir import (
    DatasetMeta,
    list_universes,
    read_calendar,
    read_instruments_file,
    read_meta,
    require_dataset,
    settle,
)
from trade_data.signals import planted_signal
from trade_data.summary import summary_tables
from trade_data.symbols import PRICE_LIMITS, Board, PriceLimit, board_of, limit_pct

BAR_FIELDS = (*PRICE_FIELDS, "volume")


@dataclass(frozen=True)
class Bars:
    """A window of one symbol's bars, oldest first; prices adjusted or raw as requested."""

    symbol: str
    dates: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    """Raw shares traded."""
    adjusted: bool

    def __len__(self) -> int:
        return len(self.dates)


class MarketStore:
    """Every bar of a dataset as read-only, memory-mapped arrays indexed [day, symbol] (Qlib's float32 values)."""

    def __init__(self, path: Path) -> None:
        self.path = require_dataset(settle(Path(path)))
        self.meta: DatasetMeta = read_meta(self.path)
        self.calendar = read_calendar(self.path)
        self.dates = self.calendar.to_numpy().astype("datetime64[D]")
        self._day_index = {d: i for i, d in enumerate(self.calendar.date)}
        listed = read_instruments_file(self.path / "instruments" / "all.txt")
        self.symbols: list[str] = list(listed["symbol"])
        self.column = {s: j for j, s in enumerate(self.symbols)}
        self.fingerprint = dataset_fingerprint(self.path)
        planted = planted_signal(self.meta.parameters) if self.meta.synthetic else None
        self.planted_signal: str | None = None if planted is None else planted.name
        """The Alpha158 factor planted in a synthetic market (``trade data synth --signal``), else None."""
        arrays = store_arrays(self.path, self.symbols, self.calendar, fingerprint=self.fingerprint)
        self._arrays = arrays
        self.adjusted = {name: arrays[f"adjusted_{name}"] for name in PRICE_FIELDS}  # float32, as Qlib stores them
        self.stored_volume = arrays["stored_volume"]  # shares / factor, as Qlib stores it
        self.factor = arrays["factor"]
        self.is_stock = np.array([board_of(s) is not Board.INDEX for s in self.symbols])  # indices' prices unrounded
        self.traded = arrays["traded"]
        self.first_day = arrays["first_day"]  # first bar, traded or not
        self.traded_offsets = offsets = arrays["traded_offsets"]  # where each symbol's rows start in bar tables
        self._traded_rows = [arrays["traded_rows"][offsets[j] : offsets[j + 1]] for j in range(len(self.symbols))]
        self._traded_by = arrays["traded_by"]  # [symbol, day] traded days so far (a symbol's row is contiguous)
        self._columns: dict[int, dict[str, int]] = {}  # per count of listed symbols: views share them
        self.previous_close = arrays["previous_close"]  # adjusted close of the last traded day before each day
        self.limit_up, self.limit_down = arrays["limit_up"], arrays["limit_down"]
        self._membership: dict[str, np.ndarray] = {}
        self._views: dict[int, PointInTimeView] = {}
        self.bar_tables = BarTables(self)
        self.indices = [s for s in self.symbols if board_of(s) is Board.INDEX]
        self.day_tables = summary_tables(self)
        """[day, ...] tables precomputed for each calendar day (the market summary's), read at T0 by views."""

    @classmethod
    def load(cls, path: Path | str) -> MarketStore:
        return cls(Path(path))

    def day_index(self, day: str | dt.date | pd.Timestamp) -> int:
        """Position of a trading day in the calendar; a clear error for anything else."""
        try:
            date = pd.Timestamp(day).date()
        except (ValueError, TypeError) as exc:
            raise DatasetError(f"{day!r} is not a date", hint="use YYYY-MM-DD") from exc
        index = self._day_index.get(date)
        if index is None:
            first, last = self.calendar[0].date(), self.calendar[-1].date()
            if not first <= date <= last:
                raise DatasetError(f"{date} is outside the dataset ({first} .. {last})")
            before = self.calendar[self.calendar.searchsorted(pd.Timestamp(date)) - 1].date()
            raise DatasetError(f"{date} is not a trading day", hint=f"the trading day before is {before}")
        return index

    def shift(self, day: str | dt.date | pd.Timestamp, k: int) -> dt.date:
        """The trading day ``k`` trading days after ``day`` (T+k); negative ``k`` goes back."""
        index = self.day_index(day) + k
        if not 0 <= index < len(self.calendar):
            raise DatasetError(f"T{k:+d} from {day} is outside the dataset's calendar")
        return self.calendar[index].date()

    def asof(self, day: str | dt.date | pd.Timestamp) -> PointInTimeView:
        """A reader bound to trading day ``day``: it can see that day's close and nothing later.

        Views are cached per day, so what is derived from one (``view.memo``) is shared by every
        episode on that day.
        """
        index = self.day_index(day)
        view = self._views.get(index)
        if view is None:
            view = self._views[index] = PointInTimeView(self._until(index), index)
        return view

    def _until(self, index: int) -> _Past:
        """Everything a view of day ``index`` reads, cut after that day (slices, no copies of the big arrays)."""
        end = index + 1
        return _Past(
            date=self.calendar[index].date(),
            synthetic=self.meta.synthetic,
            dates=self.dates[:end],
            column=self._listed_columns(index),
            indices=[s for s in self.indices if self.first_day[self.column[s]] <= index],
            traded_by=self._traded_by[:, :end],
            adjusted={name: values[:end] for name, values in self.adjusted.items()},
            stored_volume=self.stored_volume[:end],
            factor=self.factor[:end],
            is_stock=self.is_stock,
            traded=self.traded[:end],
            limit_up=self.limit_up[:end],
            limit_down=self.limit_down[:end],
            previous_close=self.previous_close[:end],
            membership={name: self.membership(name)[:end] for name in self.universe_names},
            day_tables={name: values[:end] for name, values in self.day_tables.items()},
            bar_tables=weakref.ref(self.bar_tables),
        )

    def _listed_columns(self, index: int) -> dict[str, int]:
        """Column of every symbol with a bar by day ``index``; one dict per number of such symbols (listings only
        add symbols, so the count names the set), shared by the views of every day with that count."""
        known = np.flatnonzero(self.first_day <= index)
        found = self._columns.get(known.size)
        if found is None:
            found = self._columns[known.size] = {self.symbols[j]: int(j) for j in known}
        return found

    @cached_property
    def universe_names(self) -> list[str]:
        return ["all", *list_universes(self.path)]

    def membership(self, universe: str) -> np.ndarray:
        """Bool [day, symbol] membership of a universe (symbols of the dataset only)."""
        if universe not in self._membership:
            if universe not in self.universe_names:
                raise _unknown_universe(universe, self.universe_names)
            self._membership[universe] = self._arrays[f"member-{universe}"]
        return self._membership[universe]


def _unknown_universe(universe: str, known: list[str]) -> DatasetError:
    return DatasetError(f"unknown universe '{universe}'", hint=f"known: {', '.join(known)}")


@dataclass(frozen=True)
class _Past:
    """A store's arrays up to day T0 and the symbols listed by then: all a view holds, so no attribute of a
    view leads to a later bar, a later listing or the MarketStore (the slices share the store's memory)."""

    date: dt.date
    synthetic: bool
    dates: np.ndarray
    column: dict[str, int]
    """Column of every symbol that had a bar by T0."""
    indices: list[str]
    traded_by: np.ndarray
    """[symbol, day]: traded days so far, per symbol (a view finds its traded rows in it)."""
    adjusted: dict[str, np.ndarray]
    """Qlib's float32 values: prices x factor, and volume / factor as ``stored_volume``."""
    stored_volume: np.ndarray
    factor: np.ndarray
    is_stock: np.ndarray
    """Per column: a stock (raw prices rounded to the cent), not an index."""
    traded: np.ndarray
    limit_up: np.ndarray
    limit_down: np.ndarray
    previous_close: np.ndarray
    membership: dict[str, np.ndarray]
    day_tables: dict[str, np.ndarray]
    bar_tables: weakref.ref[BarTables]
    """The store's precomputed per-bar tables, by a weak reference (a view keeps no store alive) and read
    only at a symbol's traded rows up to T0 (:meth:`PointInTimeView.bar_row`)."""


class PointInTimeView:
    """Reads as of the close of trading day T0; every array it holds ends at T0."""

    def __init__(self, past: _Past, index: int) -> None:
        self._past = past
        self.index = index
        self.date: dt.date = past.date
        self.synthetic = past.synthetic
        self.memo: dict[object, object] = {}
        """Values derived from this day's data (e.g. the market summary), computed once."""

    def _column(self, symbol: str) -> int:
        j = self._past.column.get(symbol)
        if j is None:  # later listings do not exist yet
            raise DatasetError(f"unknown symbol '{symbol}' on {self.date}", hint="symbols look like SH600519")
        return j

    def _prices(
        self, rows: np.ndarray | int | slice, column: np.ndarray | int, *, adjusted: bool
    ) -> dict[str, np.ndarray]:
        """Open/high/low/close at ``rows`` x ``column`` in float64: adjusted, or raw (over the factor, to the cent)."""
        past = self._past
        prices = np.array([_at(past.adjusted[name], rows, column) for name in PRICE_FIELDS], dtype=np.float64)
        if not adjusted:  # all four in one pass: a read of a few bars is numpy's per-call overhead
            prices = raw_prices(prices, _at(past.factor, rows, column), past.is_stock[column])
        return dict(zip(PRICE_FIELDS, prices, strict=True))

    def _shares(self, rows: np.ndarray | int | slice, column: np.ndarray | int) -> np.ndarray:
        return shares(_at(self._past.stored_volume, rows, column), _at(self._past.factor, rows, column))

    def _membership(self, universe: str) -> np.ndarray:
        found = self._past.membership.get(universe)
        if found is None:
            raise _unknown_universe(universe, self.universes)
        return found

    def _traded_rows(self, j: int, n: int) -> np.ndarray:
        """Calendar indices of the column's last ``n`` traded days up to T0: where its count of traded days rises."""
        counts = self._past.traded_by[j]
        total = int(counts[-1])
        return np.searchsorted(counts, np.arange(max(0, total - n) + 1, total + 1))

    def knows(self, symbol: str) -> bool:
        """Whether the symbol had a bar by T0 (later listings are unknown)."""
        return symbol in self._past.column

    def indices(self) -> list[str]:
        """Index symbols known at T0."""
        return list(self._past.indices)

    def symbols(self) -> list[str]:
        """Symbols that had a bar by T0 (later listings are unknown at T0)."""
        return list(self._past.column)

    def members(self, universe: str = "all") -> list[str]:
        """Members of ``universe`` at T0 by its membership intervals that have a bar by T0."""
        row = self._membership(universe)[self.index]
        return [s for s, j in self._past.column.items() if row[j]]

    def window(self, symbol: str, n: int, *, adjusted: bool = True) -> Bars:
        """The last ``n`` bars the symbol traded, ending at T0 at the latest (suspended days skipped)."""
        if n < 1:
            raise DatasetError(f"window length must be at least 1, got {n}")
        j = self._column(symbol)
        picked = self._traded_rows(j, n)
        return Bars(
            symbol=symbol,
            dates=self._past.dates[picked],
            **self._prices(picked, j, adjusted=adjusted),
            volume=self._shares(picked, j),
            adjusted=adjusted,
        )

    def last_traded_index(self, symbol: str) -> int | None:
        """Calendar index of the symbol's last traded day up to T0 (None if it never traded)."""
        rows = self._traded_rows(self._column(symbol), 1)
        return int(rows[-1]) if rows.size else None

    def bar_row(self, table: BarTable, symbol: str) -> TableRow | None:
        """``table``'s last kept row at or before the symbol's last traded day up to T0, precomputed once per
        dataset version, and how many traded days T0's bar is after it (0 for a table keeping every bar).

        None when the symbol never traded by T0, or when the store this view came from is gone: the
        caller then computes from :meth:`window` (the same values, since a bar table is causal).
        """
        j = self._column(symbol)
        count = int(self._past.traded_by[j, -1])
        tables = self._past.bar_tables()
        if tables is None or count == 0:
            return None
        return tables.row(table, j, count - 1)

    def day_row(self, name: str) -> np.ndarray | None:
        """T0's row of the dataset's precomputed per-day table ``name`` (:attr:`MarketStore.day_tables`), or None
        when it has none of that name."""
        table = self._past.day_tables.get(name)
        return None if table is None else table[self.index]

    def factor(self, symbol: str) -> float:
        """The adjustment factor of the symbol's last traded day up to T0 (raw = adjusted / factor)."""
        row = self.last_traded_index(symbol)
        return float("nan") if row is None else float(self._past.factor[row, self._column(symbol)])

    def qlib_fields(self, symbols: list[str], rows: int | None = None) -> dict[str, np.ndarray]:
        """[day, symbol] arrays of Qlib's stored fields ending at T0 (the last ``rows`` days, or all).

        Adjusted open/high/low/close and volume as shares / factor, NaN where no bar is stored;
        zero-volume placeholder rows keep their values, as Qlib sees them. For expression engines.
        """
        columns = [self._column(s) for s in symbols]
        end = self.index + 1
        begin = 0 if rows is None else max(0, end - rows)
        fields = {name: self._past.adjusted[name][begin:end, columns].astype(np.float64) for name in PRICE_FIELDS}
        fields["volume"] = self._past.stored_volume[begin:end, columns].astype(np.float64)
        return fields

    def cross_section(self, symbols: list[str], *, adjusted: bool = False) -> dict[str, np.ndarray]:
        """T0's bar for each symbol (NaN where it did not trade) plus its trading flags."""
        columns = np.array([self._column(s) for s in symbols], dtype=int)
        t = self.index
        section = self._prices(t, columns, adjusted=adjusted)
        section["volume"] = self._shares(t, columns)
        traded = self._past.traded[t, columns]
        for name in BAR_FIELDS:
            section[name] = np.where(traded, section[name], np.nan)
        section["suspended"] = ~traded
        section["limit_up"] = self._past.limit_up[t, columns]
        section["limit_down"] = self._past.limit_down[t, columns]
        return section

    def is_suspended(self, symbol: str) -> bool:
        return not bool(self._past.traded[self.index, self._column(symbol)])

    def at_limit_up(self, symbol: str, limits: Sequence[PriceLimit] = PRICE_LIMITS) -> bool:
        """Whether T0's close is at the limit-up price under ``limits`` (default: the exchanges' table)."""
        return self._limit_hits(symbol, limits)[0]

    def at_limit_down(self, symbol: str, limits: Sequence[PriceLimit] = PRICE_LIMITS) -> bool:
        return self._limit_hits(symbol, limits)[1]

    def _limit_hits(self, symbol: str, limits: Sequence[PriceLimit]) -> tuple[bool, bool]:
        j, t = self._column(symbol), self.index
        fraction = limit_pct(symbol, self.date, limits)
        if fraction is None or not self._past.traded[t, j]:
            return False, False
        past = self._past
        factor = float(past.factor[t, j])
        close = raw_prices(past.adjusted["close"][t, j], factor, past.is_stock[j])
        up, down = limit_hits(close, float(past.previous_close[t, j]), factor, fraction)
        return bool(up), bool(down)

    def last_close(self, symbol: str, *, adjusted: bool = False) -> float:
        """The close of the last day the symbol traded, up to T0 (the price suspended stocks keep)."""
        bars = self.window(symbol, 1, adjusted=adjusted)
        if len(bars) == 0:
            raise DatasetError(f"{symbol} has no bar up to {self.date}")
        return float(bars.close[-1])

    def previous_close(self, symbol: str) -> float | None:
        """The close of the last traded day before T0 on T0's price basis, rounded to the cent: the exchanges'
        ex-right reference, and the cost basis of a holding bought then. It is the raw close but on an ex-date,
        where the raw close would read the dividend as a loss beside the T0-based prices the tools show; None if
        there is none."""
        bars = self.window(symbol, 2)
        before = bars.close[bars.dates < np.datetime64(self.date)]
        return float(round_cents(before[-1] / self.factor(symbol))) if before.size else None

    def series(self, symbol: str, name: str = "close", *, adjusted: bool = True) -> np.ndarray:
        """One field over every calendar day up to T0 (NaN when not traded), for index-style maths."""
        j = self._column(symbol)
        days = slice(None)
        values = self._shares(days, j) if name == "volume" else self._prices(days, j, adjusted=adjusted)[name]
        return np.where(self._past.traded[:, j], values, np.nan)

    def advancers(self, universe: str) -> tuple[int, int]:
        """(advancing, compared) members of ``universe`` at T0: traded today and before, change > 0."""
        t, past = self.index, self._past
        up, compared = advancing(
            past.traded[t], self._membership(universe)[t], past.previous_close[t], past.adjusted["close"][t]
        )  # float32 compared with float32: the same order as their float64 values
        return int(up), int(compared)

    @property
    def universes(self) -> list[str]:
        return list(self._past.membership)


def _at(array: np.ndarray, rows: np.ndarray | int | slice, column: np.ndarray | int) -> np.ndarray:
    """``array[rows, column]`` for rows of one column or columns of one row, indexed one axis at a time (numpy's
    two-axis fancy indexing costs twice as much on the few values a read takes)."""
    if isinstance(rows, (int, np.integer)):
        return array[rows][column]
    return array[:, column][rows]


def advancing(
    traded: np.ndarray, member: np.ndarray, previous: np.ndarray, close: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(advancing, compared) counts over the last axis of [..., symbol] rows: members that traded that day and
    before, and of those the ones whose adjusted close is above the last traded close."""
    compared = traded & member & ~np.isnan(previous)
    with np.errstate(invalid="ignore"):
        up = compared & (close > previous)
    return up.sum(axis=-1), compared.sum(axis=-1)
