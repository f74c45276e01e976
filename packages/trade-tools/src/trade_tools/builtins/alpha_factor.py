"""``compute_alpha_factor``: a named Alpha158 factor or a whitelisted Qlib expression, ranked at T0."""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from trade_tools import text
from trade_tools.episode import Episode
from trade_tools.tool import Arguments, Tool, ToolError


class AlphaArgs(Arguments):
    expression: str = Field(
        description='Alpha158因子名（如 ROC20、KMID、RSQR60）或Qlib表达式，如 "Mean($close,5)/$close"；'
        "字段仅限 $open $high $low $close $volume，窗口为1-250的整数"
    )
    symbols: list[str] = Field(description="股票代码列表（须在股票池或持仓中）")
    period: str = Field("60d", description='兼容参数，如 "60d"（1-250）；因子按自身所需的历史计算')


class ComputeAlphaFactor(Tool):
    name = "compute_alpha_factor"
    description = "计算Alpha因子在T0的取值并在给定股票间排序（从高到低）。支持Alpha158因子名或自定义Qlib表达式。"
    arguments = AlphaArgs
    budget = 1200

    def run(self, episode: Episode, args: AlphaArgs) -> str:
        from trade_tools.alpha import columns_at, lookback, resolve, value_at_t0
        from trade_tools.expression import ExpressionError

        if not args.symbols:
            raise ToolError("symbols 不能为空")
        symbols = list(dict.fromkeys(episode.check_symbol(s) for s in args.symbols))
        text.parse_period(args.period)  # kept for the reference's callers; the factor reads the history it needs
        try:
            name, node = resolve(args.expression)
        except ExpressionError as error:
            raise ToolError(f"表达式被拒绝：{error.one_line()}") from None
        values = value_at_t0(node, columns_at(episode.view, symbols, rows=lookback(node) + 1))
        order = sorted(
            range(len(symbols)), key=lambda i: (math.isnan(values[i]), -values[i] if not math.isnan(values[i]) else 0)
        )
        label = f"Alpha158因子 {name}" if name else f"表达式 {args.expression.strip()}"
        lines = [f"## {label}（截至{episode.view.date}收盘，按取值从高到低）"]
        for rank, i in enumerate(order, start=1):
            shown = "无数据（停牌或历史不足）" if np.isnan(values[i]) else f"{values[i]:.6g}"
            lines.append(f"{rank}. {symbols[i]}: {shown}")
        return "\n".join(lines)
