"""Technical indicators for ``get_price_data``, computed from a point-in-time view's bars.

Computed per symbol on its traded bars (suspended days skipped). Every indicator is causal; what a read
costs and what is stored depends on its kind, and every value is pandas' on the bars up to T0, as when all
nineteen were stored for every bar (a table 2.6x the bars' size; ``test_indicator_store.py`` compares every bar):

- the rolling means and rates (MA, VWAP, VOL_20, ROC, the volume ratio) depend on the last 61 bars at most and are
  computed from them when read;
- the recursive ones (EMAs, MACD, ATR, RSI) depend on every bar since the symbol's first: their six running
  averages are pandas' ``ewm(adjust=False)`` over the whole history, kept every 16th bar
  (:data:`INDICATOR_STATES`, 3 bytes a bar), and a read carries the last kept state over the bars since with
  pandas' own step, to the bit;
- the Bollinger bands are stored for every bar (:data:`INDICATOR_BANDS`, float32, 8 bytes a bar): pandas'
  running variance carries the rounding of every earlier window, so a fresh window's can end one float32 step
  away, and that moved a shown digit (1 text in 71,110 over the whole synthetic market).

Both tables are trade-data bar tables, computed once per dataset version, memory-mapped and shared by every
process. Price-level indicators are kept on the adjusted scale; the tool divides by T0's factor to show them on
T0's raw price scale (forward-adjusted to T0), comparable with the latest close. The names and what each means
are in :mod:`trade_tools.indicator_names`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from trade_data.bar_tables import BarTable
from trade_data.store import Bars, PointInTimeView
from trade_tools.indicator_names import INDICATORS

WINDOW = 61
"""Bars the rolling indicators read: MA60's 60, and VOL_20's 20 changes of 21 closes."""
STATES = ("EMA12", "EMA26", "MACD_DEA", "ATR_14", "GAIN_14", "LOSS_14")
"""The recursive averages, in float64: of the close (span 12, 26), of MACD_DIF (span 9), of the true range,
of the gains and of the losses (Wilder's, alpha 1/14)."""
_WILDER = 1 / 14


def _alpha(*, span: float | None = None, alpha: float | None = None) -> float:
    """The smoothing pandas applies for ``ewm(span=...)`` or ``ewm(alpha=...)``: derived through the centre of
    mass as pandas derives it, so a step here is pandas' to the last bit."""
    com = (span - 1) / 2 if span is not None else (1 - alpha) / alpha  # type: ignore[operator]
    return 1.0 / (1.0 + com)


_ALPHAS = (_alpha(span=12), _alpha(span=26), _alpha(span=9), _alpha(alpha=_WILDER))


def _states(bars: Bars) -> np.ndarray:
    """:data:`STATES` at every bar: pandas' ``ewm(adjust=False).mean()`` over the bars from the symbol's first."""
    close, high, low = (pd.Series(values) for values in (bars.close, bars.high, bars.low))
    previous = close.shift(1)
    ema12, ema26 = close.ewm(span=12, adjust=False).mean(), close.ewm(span=26, adjust=False).mean()
    dea = (ema12 - ema26).ewm(span=9, adjust=False).mean()
    true_range = pd.concat([high - low, (high - previous).abs(), (low - previous).abs()], axis=1).max(axis=1)
    change = close.diff()
    gain = change.clip(lower=0).ewm(alpha=_WILDER, adjust=False).mean()
    loss = (-change.clip(upper=0)).ewm(alpha=_WILDER, adjust=False).mean()
    atr = true_range.ewm(alpha=_WILDER, adjust=False).mean()
    return np.column_stack([ema12, ema26, dea, atr, gain, loss]).astype(np.float64)


INDICATOR_STATES = BarTable(
    name="indicator-states", version="1", columns=STATES, compute=_states, every=16, dtype=np.float64
)
BANDS = ("BOLL_UPPER", "BOLL_LOWER")


def _bands(bars: Bars) -> np.ndarray:
    """:data:`BANDS` at every bar, float32: pandas' 20-bar mean and standard deviation (ddof 0), 2 apart."""
    close = pd.Series(bars.close)
    mean, std = close.rolling(20).mean(), close.rolling(20).std(ddof=0)
    return np.column_stack([mean + 2 * std, mean - 2 * std]).astype(np.float32)


INDICATOR_BANDS = BarTable(name="indicator-bands", version="1", columns=BANDS, compute=_bands)


def _step(weighted: float, value: float, alpha: float) -> float:
    """One bar of pandas' ``ewm(adjust=False).mean()``: its arithmetic, in its order (and its NaN start)."""
    if weighted != weighted:
        return value
    if weighted != value:  # pandas skips the step on an unchanged value
        keep = 1.0 - alpha
        weighted = (keep * weighted + alpha * value) / (keep + alpha)
    return weighted


def _carry(state: np.ndarray, tail: Bars, bars: int) -> list[float]:
    """:data:`STATES` carried from the bar ``bars`` before the last of ``tail`` to the last, a step a bar."""
    ema12, ema26, dea, atr, gain, loss = (float(x) for x in state)
    a12, a26, a9, wilder = _ALPHAS
    close, high, low = tail.close.tolist(), tail.high.tolist(), tail.low.tolist()
    for i in range(len(close) - bars, len(close)):
        previous = close[i - 1]
        ema12, ema26 = _step(ema12, close[i], a12), _step(ema26, close[i], a26)
        dea = _step(dea, ema12 - ema26, a9)
        atr = _step(atr, max(high[i] - low[i], abs(high[i] - previous), abs(low[i] - previous)), wilder)
        change = close[i] - previous
        gain = _step(gain, change if change > 0 else 0.0, wilder)
        loss = _step(loss, -change if change < 0 else 0.0, wilder)
    return [ema12, ema26, dea, atr, gain, loss]


def _indicators(tail: Bars, state: list[float] | np.ndarray, bands: np.ndarray) -> dict[str, float]:
    """Every indicator at the last of ``tail`` (a symbol's last :data:`WINDOW` bars at most, all of them when
    fewer), from the recursive averages and the bands there; float32-rounded, as the values were always kept."""
    close, volume = tail.close, tail.volume
    n = len(close)
    nan = math.nan

    def last(values: np.ndarray, k: int) -> np.ndarray | None:
        return values[-k:] if n >= k else None

    def mean(values: np.ndarray | None) -> float:
        return nan if values is None else float(values.mean())

    ema12, ema26, dea, atr, gain, loss = (np.float64(x) for x in state)
    dif = ema12 - ema26
    ma20, close21 = mean(last(close, 20)), last(close, 21)
    volume5 = last(volume, 5)
    with np.errstate(divide="ignore", invalid="ignore"):
        rsi = 100 - 100 / (1 + gain / loss)
    values = {
        "MA5": mean(last(close, 5)),
        "MA10": mean(last(close, 10)),
        "MA20": ma20,
        "MA60": mean(last(close, 60)),
        "EMA12": ema12,
        "EMA26": ema26,
        "VWAP": nan if volume5 is None else float((close[-5:] * volume5).sum() / volume5.sum()),
        "MACD_DIF": dif,
        "MACD_DEA": dea,
        "MACD_HIST": 2 * (dif - dea),
        "BOLL_UPPER": bands[0],
        "BOLL_MID": ma20,
        "BOLL_LOWER": bands[1],
        "ATR_14": atr if n > 13 else nan,
        "VOL_20": nan if close21 is None else float((close21[1:] / close21[:-1] - 1).std(ddof=1)),
        "ROC_5": close[-1] / close[-6] - 1 if n >= 6 else nan,
        "ROC_20": close[-1] / close[-21] - 1 if n >= 21 else nan,
        "VOL_RATIO_5_20": mean(volume5) / mean(last(volume, 20)) if n >= 20 else nan,
        "RSI_14": rsi if n > 14 else nan,
    }
    rounded = np.array([values[name] for name in INDICATORS], dtype=np.float64).astype(np.float32)
    return dict(zip(INDICATORS, rounded.tolist(), strict=True))


def _tail(bars: Bars) -> Bars:
    fields = ("dates", "open", "high", "low", "close", "volume")
    return dataclasses.replace(bars, **{name: getattr(bars, name)[-WINDOW:] for name in fields})


def latest(view: PointInTimeView, symbol: str) -> dict[str, float]:
    """Every indicator at the symbol's last traded day up to T0 (NaN if it never traded)."""
    key = ("indicators", symbol)
    if key not in view.memo:
        kept, bands = view.bar_row(INDICATOR_STATES, symbol), view.bar_row(INDICATOR_BANDS, symbol)
        if kept is None or bands is None:  # never traded, or the view outlived its store: from the bars up to T0
            view.memo[key] = latest_of(view.window(symbol, view.index + 1))
        else:
            tail = view.window(symbol, WINDOW)
            view.memo[key] = _indicators(tail, _carry(kept.values, tail, kept.behind), bands.values)
    return view.memo[key]  # type: ignore[return-value]


def latest_of(bars: Bars) -> dict[str, float]:
    """Every indicator at the last of ``bars`` (adjusted, from the symbol's first bar: the recursive averages
    start where the table's do), NaN when there is none."""
    if len(bars) == 0:
        return dict.fromkeys(INDICATORS, math.nan)
    return _indicators(_tail(bars), _states(bars)[-1], _bands(bars)[-1])


def daily_changes(close: np.ndarray) -> np.ndarray:
    """Each bar's change against the bar before it (NaN for the first)."""
    return close / np.concatenate([[np.nan], close[:-1]]) - 1
