"""``MarketStore``: a dataset in memory as (dates x symbols) arrays, read point in time.

Tool calls inside RL rollouts read bars thousands of times a second, so everything is
loaded once into numpy arrays and every read is an index lookup. Reads happen through a
:class:`PointInTimeView` bound to a day T0: it only holds array slices that end at T0, so no
method can return anything dated after T0, whatever the caller asks for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
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
from trade_data.symbols import PRICE_LIMITS, Board, PriceLimit, board_of, limit_fractions, limit_pct

PRICE_FIELDS = ("open", "high", "low", "close")
BAR_FIELDS = (*PRICE_FIELDS, "volume")
_STORED = ("open", "high", "low", "close", "volume", "factor")


def _round_cents(values: np.ndarray) -> np.ndarray:
    """Round half up to the cent, the way exchanges round prices (np.round rounds half to even)."""
    return np.floor(values * 100.0 + 0.5 + 1e-9) / 100.0


def _limit_hits(
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
        reference = _round_cents(previous_close / factor)
        up = close >= _round_cents(reference * (1 + fraction)) - 1e-6
        down = close <= _round_cents(reference * (1 - fraction)) + 1e-6
    return up, down


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
        self._traded_by = np.cumsum(self.traded, axis=0, dtype=np.int32)  # traded days so far: where a view cuts
        # Adjusted close of the last traded day before each day: the reference for changes and limits.
        traded_close = np.where(self.traded, self.adjusted["close"], np.nan)
        self.previous_close = pd.DataFrame(traded_close).ffill().shift(1).to_numpy()
        self.limit_up, self.limit_down = self._limit_flags()
        self._membership: dict[str, np.ndarray] = {}
        self._views: dict[int, PointInTimeView] = {}
        self.indices = [s for s in self.symbols if board_of(s) is Board.INDEX]

    @classmethod
    def load(cls, path: Path | str) -> MarketStore:
        return cls(Path(path))

    def _limit_flags(self) -> tuple[np.ndarray, np.ndarray]:
        """Traded days closing at the board's limit under :data:`~trade_data.symbols.PRICE_LIMITS`."""
        fractions = limit_fractions(self.symbols, self.calendar.date)
        up, down = _limit_hits(self.raw["close"], self.previous_close, self.factor, fractions)
        return up & self.traded, down & self.traded

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
        known = np.flatnonzero(self.first_day <= index)
        return _Past(
            date=self.calendar[index].date(),
            synthetic=self.meta.synthetic,
            dates=self.dates[:end],
            column={self.symbols[j]: int(j) for j in known},
            indices=[s for s in self.indices if self.first_day[self.column[s]] <= index],
            traded_rows=[rows[:count] for rows, count in zip(self._traded_rows, self._traded_by[index], strict=True)],
            adjusted={name: values[:end] for name, values in self.adjusted.items()},
            raw={name: values[:end] for name, values in self.raw.items()},
            volume=self.volume[:end],
            stored_volume=self._stored_volume[:end],
            factor=self.factor[:end],
            traded=self.traded[:end],
            limit_up=self.limit_up[:end],
            limit_down=self.limit_down[:end],
            previous_close=self.previous_close[:end],
            membership={name: self.membership(name)[:end] for name in self.universe_names},
        )

    @cached_property
    def universe_names(self) -> list[str]:
        return ["all", *list_universes(self.path)]

    def membership(self, universe: str) -> np.ndarray:
        """Bool [day, symbol] membership of a universe (symbols of the dataset only)."""
        if universe not in self._membership:
            if universe not in self.universe_names:
                raise _unknown_universe(universe, self.universe_names)
            if universe == "all":
                matrix = np.arange(len(self.dates))[:, None] >= self.first_day[None, :]
            else:
                matrix = member_days(read_universe(self.path, universe), self.calendar, self.symbols)
            self._membership[universe] = matrix
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
    traded_rows: list[np.ndarray]
    adjusted: dict[str, np.ndarray]
    raw: dict[str, np.ndarray]
    volume: np.ndarray
    stored_volume: np.ndarray
    factor: np.ndarray
    traded: np.ndarray
    limit_up: np.ndarray
    limit_down: np.ndarray
    previous_close: np.ndarray
    membership: dict[str, np.ndarray]


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

    def _prices(self, adjusted: bool) -> dict[str, np.ndarray]:
        return self._past.adjusted if adjusted else self._past.raw

    def _membership(self, universe: str) -> np.ndarray:
        found = self._past.membership.get(universe)
        if found is None:
            raise _unknown_universe(universe, self.universes)
        return found

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
        picked = self._past.traded_rows[j][-n:]
        prices = self._prices(adjusted)
        return Bars(
            symbol=symbol,
            dates=self._past.dates[picked],
            open=prices["open"][picked, j],
            high=prices["high"][picked, j],
            low=prices["low"][picked, j],
            close=prices["close"][picked, j],
            volume=self._past.volume[picked, j],
            adjusted=adjusted,
        )

    def last_traded_index(self, symbol: str) -> int | None:
        """Calendar index of the symbol's last traded day up to T0 (None if it never traded)."""
        rows = self._past.traded_rows[self._column(symbol)]
        return int(rows[-1]) if rows.size else None

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
        fields = {name: self._past.adjusted[name][begin:end, columns] for name in PRICE_FIELDS}
        fields["volume"] = self._past.stored_volume[begin:end, columns]
        return fields

    def cross_section(self, symbols: list[str], *, adjusted: bool = False) -> dict[str, np.ndarray]:
        """T0's bar for each symbol (NaN where it did not trade) plus its trading flags."""
        columns = np.array([self._column(s) for s in symbols], dtype=int)
        t = self.index
        prices = self._prices(adjusted)
        section = {name: values[t, columns] for name, values in prices.items()}
        section["volume"] = self._past.volume[t, columns]
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
        up, down = _limit_hits(past.raw["close"][t, j], past.previous_close[t, j], past.factor[t, j], fraction)
        return bool(up), bool(down)

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
        values = self._past.volume if name == "volume" else self._prices(adjusted)[name]
        return np.where(self._past.traded[:, j], values[:, j], np.nan)

    def advancers(self, universe: str) -> tuple[int, int]:
        """(advancing, compared) members of ``universe`` at T0: traded today and before, change > 0."""
        t = self.index
        previous = self._past.previous_close[t]
        compared = self._past.traded[t] & self._membership(universe)[t] & ~np.isnan(previous)
        with np.errstate(invalid="ignore"):
            up = compared & (self._past.adjusted["close"][t] > previous)
        return int(up.sum()), int(compared.sum())

    @property
    def universes(self) -> list[str]:
        return list(self._past.membership)
