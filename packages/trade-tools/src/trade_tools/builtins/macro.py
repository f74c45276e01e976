"""``get_macro_indicators``: an index's change, volatility, trend and last days, as of T0."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from trade_data.summary import INDEX_NAMES
from trade_tools import text
from trade_tools.episode import Episode
from trade_tools.tool import Arguments, Tool, ToolError


class MacroArgs(Arguments):
    index: str = Field("SH000300", description="指数代码：SH000300 沪深300，SH000905 中证500，SH000001 上证指数")
    period: str = Field("20d", description='回看交易日数，如 "20d"（2-250）')


class GetMacroIndicators(Tool):
    name = "get_macro_indicators"
    description = "查询大盘指数截至T0收盘的区间涨跌、日波动率、均线趋势和近5日走势。"
    arguments = MacroArgs
    budget = 800

    def run(self, episode: Episode, args: MacroArgs) -> str:
        view = episode.view
        index = args.index.strip().upper()
        indices = view.indices()
        if index not in indices:
            raise ToolError(f"未知指数 {args.index!r}；可用：{', '.join(indices)}")
        days = text.parse_period(args.period, minimum=2)
        bars = view.window(index, max(days, 20) + 1)
        close = bars.close[-(days + 1) :]
        dates = bars.dates[-(days + 1) :]
        returns = np.diff(close) / close[:-1]
        ma5, ma20 = bars.close[-5:].mean(), bars.close[-20:].mean()
        if len(bars) < 20:
            trend = "历史不足20日"
        else:
            label = (
                "短期强于中期（偏多）"
                if ma5 > ma20 * 1.005
                else "短期弱于中期（偏空）"
                if ma5 < ma20 * 0.995
                else "均线缠绕（震荡）"
            )
            trend = f"MA5 {ma5:.2f} / MA20 {ma20:.2f}，{label}"
        hi, lo = int(np.argmax(close)), int(np.argmin(close))
        name = INDEX_NAMES.get(index, index)
        lines = [
            f"## {name}({index}) 近{len(close) - 1}个交易日（截至{view.date}收盘）",
            f"最新：收{close[-1]:.2f} 涨跌{text.pct(returns[-1] if returns.size else np.nan)} "
            f"量{text.lots(bars.volume[-1])}",
            f"区间涨跌{text.pct(close[-1] / close[0] - 1)}，日波动率{np.std(returns, ddof=1):.2%}"
            if returns.size > 1
            else "区间数据不足",
            f"区间收盘最高{close[hi]:.2f}({text.day(dates[hi])}) 最低{close[lo]:.2f}({text.day(dates[lo])})",
            f"趋势：{trend}",
            "近5日："
            + " | ".join(
                f"{text.day(d)[5:]} {c:.2f} {text.mark(r)}"
                for d, c, r in zip(dates[-5:], close[-5:], returns[-5:], strict=False)
            ),
        ]
        return "\n".join(lines)
