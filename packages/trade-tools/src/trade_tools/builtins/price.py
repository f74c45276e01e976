"""``get_price_data``: a symbol's recent bars and indicator values, as of T0."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import Field

from trade_tools import text
from trade_tools.indicator_names import DESCRIPTIONS, INDICATORS, PRICE_LEVEL
from trade_tools.tool import EXAMPLE_SYMBOL, Arguments, Tool, ToolError

if TYPE_CHECKING:
    from trade_tools.episode import Episode

DEFAULT_INDICATORS = ["MA5", "MA20", "MACD_DIF", "RSI_14", "VOL_20"]


class PriceArgs(Arguments):
    symbol: str = Field(description=f"股票代码，如 {EXAMPLE_SYMBOL}（须在股票池或持仓中）")
    period: str = Field("20d", description='回看交易日数，如 "20d"（1-250）')
    indicators: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INDICATORS),
        description=f"技术指标名列表（名称见工具说明），省略时为 {', '.join(DEFAULT_INDICATORS)}",
    )


class GetPriceData(Tool):
    name = "get_price_data"
    description = (
        "查询一只股票截至T0收盘的行情：最新K线、区间高低点、近5日走势和技术指标最新值。"
        "价格为以T0为基准的前复权价（最新价即T0实际收盘价）。"
        f"indicators 须用以下名称：{', '.join(INDICATORS)}。"
    )
    arguments = PriceArgs
    budget = 1500

    def run(self, episode: Episode, args: PriceArgs) -> str:
        from trade_tools.indicators import daily_changes

        symbol = episode.check_symbol(args.symbol)
        days = text.parse_period(args.period)
        names = [n.strip().upper() for n in args.indicators]
        unknown = [n for n in names if n not in INDICATORS]
        if unknown:
            raise ToolError(f"未知指标 {text.shown(', '.join(unknown))}；可用：{', '.join(INDICATORS)}")
        view = episode.view
        bars = episode.bars(symbol, max(days, 5) + 1)  # one bar more: the first shown day's change needs it
        if len(bars) == 0:
            raise ToolError(f"{symbol} 截至{view.date}没有行情")
        to_t0 = 1 / view.factor(symbol)  # adjusted -> T0 raw scale (forward-adjusted to T0)
        base, scale = bars.close * to_t0, to_t0 * episode.price_scale(symbol)  # then the episode's (1: plain)
        close, high, low = base * episode.price_scale(symbol), bars.high * scale, bars.low * scale
        changes = daily_changes(base)  # from the unscaled closes: the plain episode's to the last bit
        first = period_start(len(bars), days)
        status = []
        if view.is_suspended(symbol):
            status.append(f"今日停牌（最后交易日{text.day(bars.dates[-1])}）")
        elif view.at_limit_up(symbol, episode.rules.price_limits):
            status.append("今日收盘涨停")
        elif view.at_limit_down(symbol, episode.rules.price_limits):
            status.append("今日收盘跌停")
        hi, lo = first + int(high[first:].argmax()), first + int(low[first:].argmin())
        lines = [
            f"## {symbol} 近{len(bars) - first}个交易日行情（前复权至{view.date}）"
            + (f" [{'；'.join(status)}]" if status else ""),
            f"最新：{text.day(bars.dates[-1])} 开{text.price(bars.open[-1] * scale)} 高{text.price(high[-1])} "
            f"低{text.price(low[-1])} 收{text.price(close[-1])} "
            f"量{text.lots(bars.volume[-1] * episode.volume_scale(symbol))} "
            f"涨跌{text.pct(changes[-1])}",
            f"区间：最高{text.price(high[hi])}({text.day(bars.dates[hi])}) "
            f"最低{text.price(low[lo])}({text.day(bars.dates[lo])}) "
            f"区间涨跌{text.pct(base[-1] / base[first - 1] - 1 if first else math.nan)}",
            "近5日："
            + " | ".join(
                f"{episode.short_day(d)} 收{text.price(c)} {text.mark(r)}"
                for d, c, r in zip(bars.dates[-5:], close[-5:], changes[-5:], strict=True)
            ),
        ]
        if names:
            values = episode.indicators(symbol)
            lines.append("技术指标（最新值）：")
            for name in names:
                value = values[name] * scale if name in PRICE_LEVEL else values[name]
                shown = _format(name, value)
                lines.append(f"- {name}: {shown}（{DESCRIPTIONS[name]}）")
        return "\n".join(lines)


def period_start(bars: int, days: int) -> int:
    """Where a period of ``days`` starts in a window of ``bars`` bars.

    The bar before it is the base of the period's change, so a window shorter than the period
    gives up its first day for the base (unless it holds a single bar).
    """
    return max(bars - days, min(1, bars - 1))


def _format(name: str, value: float) -> str:
    if math.isnan(value):
        return "历史不足"
    if name in ("VOL_20", "ROC_5", "ROC_20"):
        return f"{value:.2%}"
    if name in ("VOL_RATIO_5_20",):
        return f"{value:.2f}"
    if name == "RSI_14":
        return f"{value:.1f}"
    return f"{value:.3f}" if name.startswith("MACD") else f"{value:.2f}"
