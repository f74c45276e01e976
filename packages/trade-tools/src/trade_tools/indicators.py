"""Technical indicators for ``get_price_data``, computed from a point-in-time view's bars.

Computed per symbol on its traded bars (suspended days skipped). Every indicator is causal (rolling
windows, recursive averages, shifts), so its value at a bar depends on that bar and earlier ones only:
the whole table is computed once per dataset version over every bar (:data:`INDICATOR_TABLE`, a
trade-data bar table, memory-mapped and shared by every process) and a view reads the row of the
symbol's last traded day up to T0, exactly what computing on the bars up to T0 gives. Price-level
indicators are kept on the adjusted scale; the tool divides by T0's factor to show them on T0's raw
price scale (forward-adjusted to T0), comparable with the latest close. The names and what each means
are in :mod:`trade_tools.indicator_names`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trade_data.bar_tables import BarTable
from trade_data.store import Bars, PointInTimeView
from trade_tools.indicator_names import INDICATORS


def _compute(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Indicators of one symbol's traded bars (columns open/high/low/close/volume, adjusted prices)."""
    close, high, low, volume = frame["close"], frame["high"], frame["low"], frame["volume"]
    previous = close.shift(1)
    out: dict[str, pd.Series] = {f"MA{n}": close.rolling(n).mean() for n in (5, 10, 20, 60)}
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
    return {name: out[name].to_numpy() for name in INDICATORS}


def _table_rows(bars: Bars) -> np.ndarray:
    """Every indicator at every bar, float32 (as the values were always kept: the texts shown stay the same)."""
    frame = pd.DataFrame(
        {"open": bars.open, "high": bars.high, "low": bars.low, "close": bars.close, "volume": bars.volume}
    )
    if frame.empty:
        return np.empty((0, len(INDICATORS)), dtype=np.float32)
    computed = _compute(frame)
    return np.column_stack([computed[name] for name in INDICATORS]).astype(np.float32)


INDICATOR_TABLE = BarTable(name="indicators", version="1", columns=INDICATORS, compute=_table_rows)


def latest(view: PointInTimeView, symbol: str) -> dict[str, float]:
    """Every indicator at the symbol's last traded day up to T0 (NaN if it never traded)."""
    key = ("indicators", symbol)
    if key not in view.memo:
        row = view.bar_row(INDICATOR_TABLE, symbol)
        if row is None:  # never traded, or the view outlived its store: compute from the bars up to T0
            view.memo[key] = latest_of(view.window(symbol, view.index + 1))
        else:
            view.memo[key] = {name: float(value) for name, value in zip(INDICATORS, row, strict=True)}
    return view.memo[key]  # type: ignore[return-value]


def latest_of(bars: Bars) -> dict[str, float]:
    """Every indicator at the last of ``bars`` (adjusted, from the symbol's first bar: the recursive averages
    start where the table's do), NaN when there is none."""
    rows = _table_rows(bars)
    row = rows[-1] if len(rows) else np.full(len(INDICATORS), np.nan, dtype=np.float32)
    return {name: float(value) for name, value in zip(INDICATORS, row, strict=True)}


def daily_changes(close: np.ndarray) -> np.ndarray:
    """Each bar's change against the bar before it (NaN for the first)."""
    return close / np.concatenate([[np.nan], close[:-1]]) - 1
