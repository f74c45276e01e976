"""``get_macro_indicators``: an index's change, volatility, trend and last days, as of T0."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import Field

from trade_tools import text
from trade_tools.builtins.price import period_start
from trade_tools.tool import Arguments, Tool, ToolError

if TYPE_CHECKING:
    from trade_tools.episode import Episode


class MacroArgs(Arguments):
    index: str | None = Field(None, description="指数代码（见工具说明），省略时为市场状态所用的指数")
    period: str = Field("20d", description='回看交易日数，如 "20d"（1-250）')


class GetMacroIndicators(Tool):
    name = "get_macro_indicators"
    description = (
        "查询大盘指数截至T0收盘的区间涨跌、日波动率、均线趋势和近5日走势。"
        "index 可选 SH000001 上证指数、SH000300 沪深300、SH000905 中证500，省略时与市场状态为同一指数。"
    )
    arguments = MacroArgs
    budget = 800

    def run(self, episode: Episode, args: MacroArgs) -> str:
        from trade_data.summary import INDEX_NAMES
        from trade_tools.anonymize import INDEX_LEVEL
        from trade_tools.indicators import daily_changes

        view = episode.view
        index = (args.index or episode.task.index).strip().upper()  # default: the market state's index
        indices = view.indices()
        if index not in indices:
            raise ToolError(f"未知指数 {text.shown(index)}；可用：{', '.join(indices)}")
        days = text.parse_period(args.period)
        bars = episode.bars(index, max(days, 20) + 1)
        levels = bars.close * (INDEX_LEVEL / bars.close[-1] if episode.aliases else 1.0)  # a level would date T0
        changes = daily_changes(levels)
        first = period_start(len(bars), days)
        close, dates, returns = levels[first:], bars.dates[first:], changes[first:]
        ma5, ma20 = levels[-5:].mean(), levels[-20:].mean()
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
        hi, lo = int(close.argmax()), int(close.argmin())
        volatility = f"{returns.std(ddof=1):.2%}" if returns.size > 1 else "-"
        name = INDEX_NAMES.get(index, index)
        lines = [
            f"## {name}({index}) 近{len(close)}个交易日（截至{view.date}收盘）",
            f"最新：收{close[-1]:.2f} 涨跌{text.pct(changes[-1])} "
            f"量{text.lots(bars.volume[-1] * episode.volume_scale(index))}",
            f"区间涨跌{text.pct(close[-1] / levels[first - 1] - 1 if first else math.nan)}，日波动率{volatility}",
            f"区间收盘最高{close[hi]:.2f}({text.day(dates[hi])}) 最低{close[lo]:.2f}({text.day(dates[lo])})",
            f"趋势：{trend}",
            "近5日："
            + " | ".join(
                f"{episode.short_day(d)} {c:.2f} {text.mark(r)}"
                for d, c, r in zip(bars.dates[-5:], levels[-5:], changes[-5:], strict=True)
            ),
        ]
        return "\n".join(lines)
