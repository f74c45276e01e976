"""The market state at T0 in six numbers, as data and as the compact Chinese text prompts show.

It is in every prompt, so it must not cost more as the market grows: what it reads (each index's measures
and each universe's breadth) is computed once per calendar day into the dataset's precomputed tables
(:func:`summary_tables`), and a summary reads T0's rows of them. A row is computed from bars up to its day
only, by the same functions that compute it from a :class:`~trade_data.store.PointInTimeView`'s bars
(``market_summary(view, precomputed=False)``), so it holds what the view sees at T0.
Conventions: returns are simple fractions on adjusted closes; volatility is the standard
deviation of daily returns (not annualised); its regime is the percentile of today's
20-day volatility among the 20-day volatilities of the past year (252 trading days).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel

from trade_data.cache import cached_arrays
from trade_data.columns import VERSION as STORE_VERSION
from trade_data.columns import shares

if TYPE_CHECKING:
    from trade_data.store import MarketStore, PointInTimeView

VOL_WINDOW = 20
LOOKBACK = 252
INDEX_NAMES = {
    "SH000001": "上证指数",
    "SH000300": "沪深300",
    "SH000905": "中证500",
    "csi300": "沪深300",
    "csi500": "中证500",
    "all": "全市场",
}


class MarketSummary(BaseModel):
    """Market state at the close of ``date``; NaN where history is too short."""

    date: str
    index: str
    universe: str
    synthetic: bool
    volatility_20d: float
    volatility_percentile: float
    return_5d: float
    return_20d: float
    advancers: int
    traded: int
    volume_ratio_5_20: float
    style_spread_20d: float
    """20-day return of SH000300 minus SH000905: positive when large caps lead."""

    @property
    def breadth(self) -> float:
        return self.advancers / self.traded if self.traded else math.nan

    def to_text(self, *, coarse: bool = False) -> str:
        """The prompt's lines; ``coarse`` (an anonymized episode): three labels only, since the figures (a count
        like 上涨172/298家, a 20-day change to 0.01%) name the day among every date of the data."""
        name = INDEX_NAMES.get(self.index, self.index)
        lines = [f"{'【合成数据】' if self.synthetic else ''}市场状态（截至{self.date}收盘，{name}）："]
        if coarse:
            return "\n".join([*lines, *self._labels()])
        if math.isnan(self.volatility_20d):
            lines.append("- 波动：历史不足20日，无法判断")
        else:
            if math.isnan(self.volatility_percentile):
                regime = "历史不足，分位不可用"
            else:
                regime = _label(self.volatility_percentile, (0.3, 0.7), ("低波动", "中等波动", "高波动"))
                regime = f"处于近一年{self.volatility_percentile:.0%}分位，{regime}"
            lines.append(f"- 波动：20日波动率{self.volatility_20d:.2%}/日（{regime}）")
        short = _label(self.return_5d, (-0.01, 0.01), ("偏弱", "震荡", "偏强"))
        medium = _label(self.return_20d, (-0.03, 0.03), ("下行", "震荡", "上行"))
        lines.append(f"- 趋势：近5日{_pct(self.return_5d)}（{short}），近20日{_pct(self.return_20d)}（{medium}）")
        universe = INDEX_NAMES.get(self.universe, self.universe)
        lines.append(f"- 宽度：{universe}成分股上涨{self.advancers}/{self.traded}家（{_share(self.breadth)}）")
        activity = _label(self.volume_ratio_5_20, (0.85, 1.15), ("缩量", "平稳", "放量"))
        lines.append(f"- 活跃度：5日/20日均量比{_ratio(self.volume_ratio_5_20)}（{activity}）")
        style = _label(self.style_spread_20d, (-0.01, 0.01), ("小盘占优", "均衡", "大盘占优"))
        lines.append(f"- 风格：近20日沪深300相对中证500{_pct(self.style_spread_20d)}（{style}）")
        return "\n".join(lines)

    def _labels(self) -> list[str]:
        """The volatility regime and the two trends as labels alone: what a coarse text shows. Six labels still
        named 6.5% of the real sample's days alone; these three name none (breadth, activity and style are for
        the tools to read)."""
        regime = _label(self.volatility_percentile, (0.3, 0.7), ("低波动", "中等波动", "高波动"))
        short = _label(self.return_5d, (-0.01, 0.01), ("偏弱", "震荡", "偏强"))
        medium = _label(self.return_20d, (-0.03, 0.03), ("下行", "震荡", "上行"))
        return [
            f"- 波动：{regime}（20日波动率在近一年的分位：低于30%、30%-70%、高于70%）",
            f"- 趋势：近5日{short}，近20日{medium}",
        ]


def _label(value: float, edges: tuple[float, float], names: tuple[str, str, str]) -> str:
    if math.isnan(value):
        return "数据不足"
    return names[0] if value < edges[0] else names[2] if value > edges[1] else names[1]


def _pct(value: float) -> str:
    return "无数据" if math.isnan(value) else f"{value:+.2%}"


def _share(value: float) -> str:
    return "无数据" if math.isnan(value) else f"{value:.0%}"


def _ratio(value: float) -> str:
    return "无数据" if math.isnan(value) else f"{value:.2f}"


def _trailing_return(closes: np.ndarray, days: int) -> float:
    closes = closes[~np.isnan(closes)]
    return float(closes[-1] / closes[-1 - days] - 1) if closes.size > days else math.nan


MEASURES = ("volatility_20d", "volatility_percentile", "return_5d", "return_20d", "volume_ratio_5_20")
"""What is computed from an index's bars, in the order of its table's columns."""
VERSION = f"summary-1 {VOL_WINDOW} {LOOKBACK}"
"""Bump when a stored measure would change."""
_BLOCK_DAYS = 256


def index_measures(closes: np.ndarray, volumes: np.ndarray) -> np.ndarray:
    """:data:`MEASURES` of an index from its adjusted closes and volumes so far (NaN where it did not trade)."""
    closes = closes[~np.isnan(closes)][-(LOOKBACK + VOL_WINDOW + 1) :]
    returns = np.diff(closes) / closes[:-1] if closes.size > 1 else np.array([])
    vol, percentile = math.nan, math.nan
    if returns.size >= VOL_WINDOW:
        rolling = np.lib.stride_tricks.sliding_window_view(returns, VOL_WINDOW).std(axis=1, ddof=1)[-LOOKBACK:]
        vol = float(rolling[-1])
        percentile = float((rolling <= vol).mean()) if rolling.size >= VOL_WINDOW else math.nan
    volumes = volumes[~np.isnan(volumes)]
    ratio = (
        float(volumes[-5:].mean() / volumes[-20:].mean())
        if volumes.size >= 20 and volumes[-20:].mean() > 0
        else math.nan
    )
    return np.array([vol, percentile, _trailing_return(closes, 5), _trailing_return(closes, 20), ratio])


def summary_tables(store: MarketStore) -> dict[str, np.ndarray]:
    """[day, ...] tables of what summaries read, built once per dataset version (the writers build them).

    ``index-<SYMBOL>``: float64 :data:`MEASURES` of every index at each day's close (NaN before its first bar);
    ``breadth-<universe>``: int64 (advancing, compared) members of every universe, ``all`` included.
    """
    return cached_arrays(
        store.path,
        "summary",
        f"{VERSION} {STORE_VERSION}",
        lambda folder: _build(store, folder),
        fingerprint=store.fingerprint,
    )


def _build(store: MarketStore, folder: Path) -> None:
    from trade_data.store import advancing

    days = len(store.calendar)
    for symbol in store.indices:
        j = store.column[symbol]
        rows = store._traded_rows[j]
        closes = store.adjusted["close"][rows, j].astype(np.float64)
        volumes = shares(store.stored_volume[rows, j], store.factor[rows, j])
        by_bar = np.array([index_measures(closes[: k + 1], volumes[: k + 1]) for k in range(rows.size)])
        counts = store._traded_by[j]
        table = np.full((days, len(MEASURES)), np.nan)
        table[counts > 0] = by_bar.reshape(-1, len(MEASURES))[counts[counts > 0] - 1]
        np.save(folder / f"index-{symbol}.npy", table)
    breadth = {name: np.zeros((days, 2), dtype=np.int64) for name in store.universe_names}
    for begin in range(0, days, _BLOCK_DAYS):  # a block of days of the [day, symbol] arrays at a time
        block = slice(begin, begin + _BLOCK_DAYS)
        traded, previous, close = store.traded[block], store.previous_close[block], store.adjusted["close"][block]
        for name, table in breadth.items():
            table[block] = np.column_stack(advancing(traded, store.membership(name)[block], previous, close))
    for name, table in breadth.items():
        np.save(folder / f"breadth-{name}.npy", table)


def market_summary(
    view: PointInTimeView, *, index: str = "SH000001", universe: str = "csi300", precomputed: bool = True
) -> MarketSummary:
    """Summarise the market at ``view.date`` (universe falls back to ``all`` when absent); memoised per view.

    ``precomputed=False`` computes it from the view's bars instead of reading T0's rows of the dataset's tables
    (the same values: what the tables are tested against); an ``index`` without a table (not an index of the
    dataset) is always computed so.
    """
    if universe not in view.universes:
        universe = "all"
    if not precomputed:
        return _summarise(view, index, universe, precomputed=False)
    key = ("market_summary", index, universe)
    if key not in view.memo:
        view.memo[key] = _summarise(view, index, universe, precomputed=True)
    return view.memo[key]  # type: ignore[return-value]


def _measures(view: PointInTimeView, symbol: str, precomputed: bool) -> np.ndarray:
    row = view.day_row(f"index-{symbol}") if precomputed else None
    if row is not None:
        return row
    if not view.knows(symbol):
        return index_measures(np.array([]), np.array([]))
    return index_measures(view.series(symbol, "close"), view.series(symbol, "volume"))


def _summarise(view: PointInTimeView, index: str, universe: str, *, precomputed: bool) -> MarketSummary:
    vol, percentile, return_5d, return_20d, ratio = (float(x) for x in _measures(view, index, precomputed))
    big, small = (
        float(_measures(view, s, precomputed)[MEASURES.index("return_20d")]) for s in ("SH000300", "SH000905")
    )
    breadth = view.day_row(f"breadth-{universe}") if precomputed else None
    advancers, traded = view.advancers(universe) if breadth is None else (int(n) for n in breadth)
    return MarketSummary(
        date=f"{view.date:%Y-%m-%d}",
        index=index,
        universe=universe,
        synthetic=view.synthetic,
        volatility_20d=vol,
        volatility_percentile=percentile,
        return_5d=return_5d,
        return_20d=return_20d,
        advancers=advancers,
        traded=traded,
        volume_ratio_5_20=ratio,
        style_spread_20d=big - small,
    )
