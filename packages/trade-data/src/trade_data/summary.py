"""The market state at T0 in six numbers, as data and as the compact Chinese text prompts show.

Computed from a :class:`~trade_data.store.PointInTimeView`, so only bars up to T0 enter it.
Conventions: returns are simple fractions on adjusted closes; volatility is the standard
deviation of daily returns (not annualised); its regime is the percentile of today's
20-day volatility among the 20-day volatilities of the past year (252 trading days).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel

from trade_data.store import PointInTimeView

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

    def to_text(self) -> str:
        name = INDEX_NAMES.get(self.index, self.index)
        lines = [f"{'【合成数据】' if self.synthetic else ''}市场状态（截至{self.date}收盘，{name}）："]
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


def _index_closes(view: PointInTimeView, symbol: str) -> np.ndarray:
    return view.series(symbol, "close") if view.knows(symbol) else np.array([])


def market_summary(view: PointInTimeView, *, index: str = "SH000001", universe: str = "csi300") -> MarketSummary:
    """Summarise the market at ``view.date`` (universe falls back to ``all`` when absent); memoised per view."""
    if universe not in view.universes:
        universe = "all"
    key = ("market_summary", index, universe)
    if key not in view.memo:
        view.memo[key] = _summarise(view, index, universe)
    return view.memo[key]  # type: ignore[return-value]


def _summarise(view: PointInTimeView, index: str, universe: str) -> MarketSummary:
    closes = _index_closes(view, index)
    closes = closes[~np.isnan(closes)][-(LOOKBACK + VOL_WINDOW + 1) :]
    returns = np.diff(closes) / closes[:-1] if closes.size > 1 else np.array([])
    vol, percentile = math.nan, math.nan
    if returns.size >= VOL_WINDOW:
        rolling = np.lib.stride_tricks.sliding_window_view(returns, VOL_WINDOW).std(axis=1, ddof=1)[-LOOKBACK:]
        vol = float(rolling[-1])
        percentile = float((rolling <= vol).mean()) if rolling.size >= VOL_WINDOW else math.nan
    volumes = view.series(index, "volume") if view.knows(index) else np.array([])
    volumes = volumes[~np.isnan(volumes)]
    ratio = (
        float(volumes[-5:].mean() / volumes[-20:].mean())
        if volumes.size >= 20 and volumes[-20:].mean() > 0
        else math.nan
    )
    advancers, traded = view.advancers(universe)
    return MarketSummary(
        date=f"{view.date:%Y-%m-%d}",
        index=index,
        universe=universe,
        synthetic=view.synthetic,
        volatility_20d=vol,
        volatility_percentile=percentile,
        return_5d=_trailing_return(closes, 5),
        return_20d=_trailing_return(closes, 20),
        advancers=advancers,
        traded=traded,
        volume_ratio_5_20=ratio,
        style_spread_20d=_trailing_return(_index_closes(view, "SH000300"), 20)
        - _trailing_return(_index_closes(view, "SH000905"), 20),
    )
