"""``MarketStore``: a dataset in memory as (dates x symbols) arrays, read point in time.

Tool calls inside RL rollouts read bars thousands of times a second, so everything is
loaded once into numpy arrays and every read is an index lookup. Reads happen through a
:class:`PointInTimeView` bound to a day T0: it only holds array slices that end at T0, so no
method can return anything dated after T0, whatever the caller asks for.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from trade_data.errors import DatasetError
from trade_data.qlib_dir import (
    DatasetMeta,
    list_universes,
    member_days,
    read_calendar,
    read_feature,
    read_instruments_file,
    read_meta,
    read_universe,
    require_dataset,
    settle,
)
from trade_data.symbols import CHINEXT_20PCT_FROM, Board, board_of

PRICE_FIELDS = ("open", "high", "low", "close")
BAR_FIELDS = (*PRICE_FIELDS, "volume")
_STORED = ("open", "high", "low", "close", "volume", "factor")


def _round_cents(values: np.ndarray) -> np.ndarray:
    """Round half up to the cent, the way exchanges round prices (np.round rounds half to even)."""
    return np.floor(values * 100.0 + 0.5 + 1e-9) / 100.0


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
    """Every bar of a dataset, held as float64 arrays indexed [day, symbol]."""

    def __init__(self, path: Path) -> None:
        self.path = require_dataset(settle(Path(path)))
        self.meta: DatasetMeta = read_meta(self.path)
        self.calendar = read_calendar(self.path)
        self.dates = self.calendar.to_numpy().astype("datetime64[D]")
        self._day_index = {d: i for i, d in enumerate(self.calendar.date)}
        listed = read_instruments_file(self.path / "instruments" / "all.txt")
        self.symbols: list[str] = list(listed["symbol"])
        self.column = {s: j for j, s in enumerate(self.symbols)}
        days, n = len(self.calendar), len(self.symbols)
        stored = {name: np.full((days, n), np.nan) for name in _STORED}
        for j, symbol in enumerate(self.symbols):
            for name in _STORED:
                start, values = read_feature(self.path, symbol, name)
                stored[name][start : start + values.size, j] = values
        factor = stored["factor"]
        self.adjusted = {name: stored[name] for name in PRICE_FIELDS}
        self.raw = {name: stored[name] / factor for name in PRICE_FIELDS}
        is_stock = np.array([board_of(s) is not Board.INDEX for s in self.symbols])
        for name in PRICE_FIELDS:
            self.raw[name][:, is_stock] = _round_cents(self.raw[name][:, is_stock])
        self.volume = np.round(stored["volume"] * factor)  # Qlib stores shares / factor, in float32
        self._stored_volume = stored["volume"]
        self.factor = factor
        self.traded = self.volume > 0
        has_bar = ~np.isnan(self.adjusted["close"])
        self.first_day = np.where(has_bar.any(axis=0), has_bar.argmax(axis=0), days)  # first bar, traded or not
        self._traded_rows = [np.flatnonzero(self.traded[:, j]) for j in range(n)]
        # Adjusted close of the last traded day before each day: the reference for changes and limits.
        traded_close = np.where(self.traded, self.adjusted["close"], np.nan)
        self.previous_close = pd.DataFrame(traded_close).ffill().shift(1).to_numpy()
        self.limit_up, self.limit_down = self._limit_flags(is_stock)
        self._membership: dict[str, np.ndarray] = {}
        self._views: dict[int, PointInTimeView] = {}
        self.indices = [s for s in self.symbols if board_of(s) is Board.INDEX]

    @classmethod
    def load(cls, path: Path | str) -> MarketStore:
        return cls(Path(path))

    def _limit_flags(self, is_stock: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Closes at the board's limit versus the last traded close (ex-right adjusted)."""
        reference = _round_cents(self.previous_close / self.factor)
        pct = np.zeros_like(reference)
        chinext_wide = (self.dates >= np.datetime64(CHINEXT_20PCT_FROM))[:, None]
        for j, symbol in enumerate(self.symbols):
            board = board_of(symbol)
            if board is Board.CHINEXT:
                pct[:, j] = np.where(chinext_wide[:, 0], 0.20, 0.10)
            elif board is not Board.INDEX:
                pct[:, j] = {Board.MAIN: 0.10, Board.STAR: 0.20, Board.BEIJING: 0.30}[board]
        close = self.raw["close"]
        known = self.traded & is_stock[None, :] & ~np.isnan(reference)
        with np.errstate(invalid="ignore"):
            up = known & (close >= _round_cents(reference * (1 + pct)) - 1e-6)
            down = known & (close <= _round_cents(reference * (1 - pct)) + 1e-6)
        return up, down

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
            view = self._views[index] = PointInTimeView(self, index)
        return view

    @cached_property
    def universe_names(self) -> list[str]:
        return ["all", *list_universes(self.path)]

    def membership(self, universe: str) -> np.ndarray:
        """Bool [day, symbol] membership of a universe (symbols of the dataset only)."""
        if universe not in self._membership:
            if universe not in self.universe_names:
                raise DatasetError(f"unknown universe '{universe}'", hint=f"known: {', '.join(self.universe_names)}")
            if universe == "all":
                matrix = np.arange(len(self.dates))[:, None] >= self.first_day[None, :]
            else:
                matrix = member_days(read_universe(self.path, universe), self.calendar, self.symbols)
            self._membership[universe] = matrix
        return self._membership[universe]


class PointInTimeView:
    """Reads as of the close of trading day T0; every array it touches ends at T0."""

    def __init__(self, store: MarketStore, index: int) -> None:
        self._store = store
        self.index = index
        self.date: dt.date = store.calendar[index].date()
        self.synthetic = store.meta.synthetic
        self.memo: dict[object, object] = {}
        """Values derived from this day's data (e.g. the market summary), computed once."""

    def _column(self, symbol: str) -> int:
        j = self._store.column.get(symbol)
        if j is None or self._store.first_day[j] > self.index:  # later listings do not exist yet
            raise DatasetError(f"unknown symbol '{symbol}' on {self.date}", hint="symbols look like SH600519")
        return j

    def _prices(self, adjusted: bool) -> dict[str, np.ndarray]:
        source = self._store.adjusted if adjusted else self._store.raw
        return {name: values[: self.index + 1] for name, values in source.items()}

    def knows(self, symbol: str) -> bool:
        """Whether the symbol had a bar by T0 (later listings are unknown)."""
        j = self._store.column.get(symbol)
        return j is not None and self._store.first_day[j] <= self.index

    def indices(self) -> list[str]:
        """Index symbols known at T0."""
        return [s for s in self._store.indices if self.knows(s)]

    def symbols(self) -> list[str]:
        """Symbols that had a bar by T0 (later listings are unknown at T0)."""
        listed = self._store.first_day <= self.index
        return [s for s, ok in zip(self._store.symbols, listed, strict=True) if ok]

    def members(self, universe: str = "all") -> list[str]:
        """Members of ``universe`` at T0 by its membership intervals that have a bar by T0."""
        row = self._store.membership(universe)[self.index] & (self._store.first_day <= self.index)
        return [s for s, ok in zip(self._store.symbols, row, strict=True) if ok]

    def window(self, symbol: str, n: int, *, adjusted: bool = True) -> Bars:
        """The last ``n`` bars the symbol traded, ending at T0 at the latest (suspended days skipped)."""
        if n < 1:
            raise DatasetError(f"window length must be at least 1, got {n}")
        j = self._column(symbol)
        rows = self._store._traded_rows[j]
        end = int(np.searchsorted(rows, self.index, side="right"))
        picked = rows[max(0, end - n) : end]
        prices = self._prices(adjusted)
        return Bars(
            symbol=symbol,
            dates=self._store.dates[: self.index + 1][picked],
            open=prices["open"][picked, j],
            high=prices["high"][picked, j],
            low=prices["low"][picked, j],
            close=prices["close"][picked, j],
            volume=self._store.volume[: self.index + 1][picked, j],
            adjusted=adjusted,
        )

    def last_traded_index(self, symbol: str) -> int | None:
        """Calendar index of the symbol's last traded day up to T0 (None if it never traded)."""
        rows = self._store._traded_rows[self._column(symbol)]
        end = int(np.searchsorted(rows, self.index, side="right"))
        return int(rows[end - 1]) if end else None

    def factor(self, symbol: str) -> float:
        """The adjustment factor of the symbol's last traded day up to T0 (raw = adjusted / factor)."""
        row = self.last_traded_index(symbol)
        return float("nan") if row is None else float(self._store.factor[row, self._column(symbol)])

    def qlib_fields(self, symbols: list[str], rows: int | None = None) -> dict[str, np.ndarray]:
        """[day, symbol] arrays of Qlib's stored fields ending at T0 (the last ``rows`` days, or all).

        Adjusted open/high/low/close and volume as shares / factor, NaN where no bar is stored;
        zero-volume placeholder rows keep their values, as Qlib sees them. For expression engines.
        """
        columns = [self._column(s) for s in symbols]
        end = self.index + 1
        begin = 0 if rows is None else max(0, end - rows)
        fields = {name: self._store.adjusted[name][begin:end, columns] for name in PRICE_FIELDS}
        fields["volume"] = self._store._stored_volume[begin:end, columns]
        return fields

    def cross_section(self, symbols: list[str], *, adjusted: bool = False) -> dict[str, np.ndarray]:
        """T0's bar for each symbol (NaN where it did not trade) plus its trading flags."""
        columns = np.array([self._column(s) for s in symbols], dtype=int)
        t = self.index
        prices = self._prices(adjusted)
        section = {name: values[t, columns] for name, values in prices.items()}
        section["volume"] = self._store.volume[: t + 1][t, columns]
        traded = self._store.traded[: t + 1][t, columns]
        for name in BAR_FIELDS:
            section[name] = np.where(traded, section[name], np.nan)
        section["suspended"] = ~traded
        section["limit_up"] = self._store.limit_up[: t + 1][t, columns]
        section["limit_down"] = self._store.limit_down[: t + 1][t, columns]
        return section

    def is_suspended(self, symbol: str) -> bool:
        return not bool(self._store.traded[: self.index + 1][self.index, self._column(symbol)])

    def at_limit_up(self, symbol: str) -> bool:
        return bool(self._store.limit_up[: self.index + 1][self.index, self._column(symbol)])

    def at_limit_down(self, symbol: str) -> bool:
        return bool(self._store.limit_down[: self.index + 1][self.index, self._column(symbol)])

    def last_close(self, symbol: str, *, adjusted: bool = False) -> float:
        """The close of the last day the symbol traded, up to T0 (the price suspended stocks keep)."""
        bars = self.window(symbol, 1, adjusted=adjusted)
        if len(bars) == 0:
            raise DatasetError(f"{symbol} has no bar up to {self.date}")
        return float(bars.close[-1])

    def previous_close(self, symbol: str) -> float | None:
        """Raw close of the last traded day before T0 (a cost basis for holdings); None if there is none."""
        bars = self.window(symbol, 2, adjusted=False)
        before = bars.close[bars.dates < np.datetime64(self.date)]
        return float(before[-1]) if before.size else None

    def series(self, symbol: str, name: str = "close", *, adjusted: bool = True) -> np.ndarray:
        """One field over every calendar day up to T0 (NaN when not traded), for index-style maths."""
        j = self._column(symbol)
        values = self._store.volume if name == "volume" else (self._prices(adjusted)[name])
        column = values[: self.index + 1, j]
        return np.where(self._store.traded[: self.index + 1, j], column, np.nan)

    def advancers(self, universe: str) -> tuple[int, int]:
        """(advancing, compared) members of ``universe`` at T0: traded today and before, change > 0."""
        t = self.index
        previous = self._store.previous_close[: t + 1][t]
        compared = self._store.traded[: t + 1][t] & self._store.membership(universe)[t] & ~np.isnan(previous)
        with np.errstate(invalid="ignore"):
            up = compared & (self._store.adjusted["close"][: t + 1][t] > previous)
        return int(up.sum()), int(compared.sum())

    @property
    def universes(self) -> list[str]:
        return self._store.universe_names
