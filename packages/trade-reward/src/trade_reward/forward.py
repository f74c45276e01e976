"""What happened after T0: the label side of a task, computed from the market data once when the task is built.

The record itself, :class:`~trade_tools.grading.GroundTruth`, lives beside the Reward in trade-tools; this module is
the one place that reads T+k prices to fill it, outside any Episode.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_tools.grading import GroundTruth

HORIZON = 3


def _last_close(store: MarketStore, index: int, column: int) -> float:
    rows = np.flatnonzero(store.traded[: index + 1, column])
    if rows.size == 0:
        raise TradeError(f"{store.symbols[column]} has no close up to {store.calendar[index].date()}")
    return float(store.adjusted["close"][rows[-1], column])


def ground_truth(store: MarketStore, date: str | dt.date, symbols: list[str], horizon: int = HORIZON) -> GroundTruth:
    """Forward growth of ``symbols`` from the T0 close to each of the next ``horizon`` closes."""
    t0 = store.day_index(date)
    if t0 + horizon >= len(store.calendar):
        raise TradeError(f"{store.calendar[t0].date()} has no T+{horizon} in the dataset", hint="pick an earlier day")
    view = store.asof(date)
    close, growth = {}, {}
    for symbol in sorted(set(symbols)):
        j = store.column[symbol]
        base = _last_close(store, t0, j)
        growth[symbol] = [_last_close(store, t0 + k, j) / base for k in range(1, horizon + 1)]
        close[symbol] = view.last_close(symbol)
    return GroundTruth(
        date=store.calendar[t0].date(),
        horizon_dates=[store.calendar[t0 + k].date() for k in range(1, horizon + 1)],
        close=close,
        growth=growth,
    )
