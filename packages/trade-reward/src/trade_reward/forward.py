"""What happened after T0: the label side of a task, computed once when the task is built.

``GroundTruth`` holds, for every stock a task can end up holding, its raw close at T0 and its
growth to the T+1..T+k closes on adjusted prices (dividends and splits do not look like losses;
a suspended day keeps the last close). With it a reward needs no market data at all, which is
what verl's reward workers want. It is label data: it never reaches a prompt or a tool.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
from pydantic import BaseModel, Field, model_validator

from trade_core.errors import TradeError
from trade_data.store import MarketStore

HORIZON = 3


class GroundTruth(BaseModel):
    """T0 closes and forward growth for one task's symbols."""

    date: dt.date
    horizon_dates: list[dt.date] = Field(description="the T+1..T+k trading days")
    close: dict[str, float] = Field(description="raw close at T0 (the last close if suspended), CNY")
    growth: dict[str, list[float]] = Field(description="adjusted close at T+k / adjusted close at T0, k = 1..K")

    @model_validator(mode="after")
    def _shapes_agree(self) -> GroundTruth:
        """Every stock has a close and one growth per horizon date, so reading one cannot fail half-way."""
        if self.close.keys() != self.growth.keys():
            raise ValueError("close and growth must name the same stocks")
        if any(len(g) != len(self.horizon_dates) for g in self.growth.values()):
            raise ValueError("every growth needs one value per horizon date")
        return self


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
