"""``compute_alpha_factor``: a named Alpha158 factor or a whitelisted Qlib expression, ranked at T0."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from pydantic import Field

from trade_tools.tool import Arguments, Tool, ToolError

if TYPE_CHECKING:
    from trade_tools.episode import Episode
    from trade_tools.expression import Node

FACTOR_GROUPS: tuple[tuple[str, dict[str, str]], ...] = (
    (
        "越大表示今日收盘相对越低（价格÷今日收盘价）",
        {
            "ROC": "{d}日前收盘价÷今日收盘价，越大表示近{d}日跌得越多",
            "MA": "{d}日均价÷今日收盘价，越大表示收盘越低于均线",
            "MAX": "{d}日最高价÷今日收盘价，越大表示离{d}日高点越远",
            "MIN": "{d}日最低价÷今日收盘价，越大表示越接近{d}日低点",
            "QTLU": "{d}日收盘价的80%分位÷今日收盘价，越大表示收盘越低",
            "QTLD": "{d}日收盘价的20%分位÷今日收盘价，越大表示收盘越低",
            "OPEN0": "今日开盘价÷收盘价，越大表示当日从开盘跌得越多",
            "HIGH0": "今日最高价÷收盘价，越大表示收盘离当日高点越远",
            "LOW0": "今日最低价÷收盘价，越大表示收盘越接近当日低点",
        },
    ),
    (
        "越大表示涨势越强或位置越高",
        {
            "KMID": "(收盘-开盘)÷开盘，越大表示当日涨得越多",
            "KMID2": "(收盘-开盘)÷(最高-最低)，越大表示阳线实体越饱满",
            "KSFT": "(2×收盘-最高-最低)÷开盘，越大表示收盘越靠近当日高点",
            "KSFT2": "(2×收盘-最高-最低)÷(最高-最低)，越大表示收盘越靠近当日高点",
            "RSV": "(今日收盘-{d}日最低)÷({d}日最高-{d}日最低)，0到1，越大表示越接近{d}日高点",
            "RANK": "今日收盘价在{d}日收盘价中的分位，越大表示位置越高",
            "BETA": "{d}日收盘价线性回归斜率÷今日收盘价，越大表示上升趋势越陡",
            "RESI": "今日收盘价偏离{d}日回归线的残差÷今日收盘价，越大表示越高于趋势线",
            "IMAX": "{d}日最高价出现的位置÷{d}（1为今日），越大表示高点越近",
            "IMXD": "({d}日最高价位置-最低价位置)÷{d}，为正表示先见低点后见高点",
            "CNTP": "{d}日中上涨天数的占比",
            "CNTD": "{d}日中上涨天数占比减下跌天数占比",
            "SUMP": "{d}日涨幅之和÷涨跌幅绝对值之和，越大表示上涨越占优",
            "SUMD": "{d}日(涨幅之和-跌幅之和)÷涨跌幅绝对值之和，越大表示上涨越占优",
        },
    ),
    (
        "越大表示跌势越强",
        {
            "CNTN": "{d}日中下跌天数的占比",
            "SUMN": "{d}日跌幅之和÷涨跌幅绝对值之和，越大表示下跌越占优",
            "IMIN": "{d}日最低价出现的位置÷{d}（1为今日），越大表示低点越近",
        },
    ),
    (
        "波动与影线（不分涨跌）",
        {
            "KLEN": "(最高-最低)÷开盘，即当日振幅",
            "KUP": "上影线÷开盘，越大表示冲高回落越多",
            "KUP2": "上影线÷(最高-最低)，越大表示冲高回落越多",
            "KLOW": "下影线÷开盘，越大表示探底回升越多",
            "KLOW2": "下影线÷(最高-最低)，越大表示探底回升越多",
            "STD": "{d}日收盘价标准差÷今日收盘价，越大表示波动越大",
            "RSQR": "{d}日收盘价对时间回归的R²，越大表示走势越接近直线（不论涨跌）",
        },
    ),
    (
        "越大表示今日越缩量（÷今日成交量）",
        {
            "VMA": "{d}日均量÷今日成交量，越大表示今日越缩量",
            "VSTD": "{d}日成交量标准差÷今日成交量，越大表示今日量相对越小",
        },
    ),
    (
        "量价关系",
        {
            "WVMA": "{d}日量乘绝对涨跌幅的变异系数，越大表示量价波动越不稳定",
            "VSUMP": "{d}日量增之和÷量变绝对值之和，越大表示放量越占优",
            "VSUMN": "{d}日量减之和÷量变绝对值之和，越大表示缩量越占优",
            "VSUMD": "{d}日(量增之和-量减之和)÷量变绝对值之和，越大表示放量越占优",
            "CORR": "收盘价与对数成交量的{d}日相关系数，越大表示价量越同向",
            "CORD": "日涨跌与日量变的{d}日相关系数，越大表示越是涨时放量、跌时缩量",
        },
    ),
)
"""Alpha158's factor families by the direction of their value, each with its meaning ({d}: the window).

Most of Qlib's price factors divide by today's close, so their value runs against their name
(ROC5 = Ref($close, 5)/$close is largest for the stock that fell most): the model must be told.
"""
_MEANINGS = {family: meaning for _, group in FACTOR_GROUPS for family, meaning in group.items()}
_GUIDE = "；".join(
    heading + "：" + "、".join(family + ("d" if "{d}" in meaning else "") for family, meaning in group.items())
    for heading, group in FACTOR_GROUPS
)


def _meaning(name: str) -> str:
    """What an Alpha158 factor's value says, in Chinese, its window filled in (ROC5: 5日前收盘价÷...)."""
    if name in _MEANINGS:
        return _MEANINGS[name]
    family, window = re.fullmatch(r"([A-Z]+)(\d+)", name).groups()  # type: ignore[union-attr]
    return _MEANINGS[family].format(d=window)


Ranked = tuple[str, float]


def _as_shown(episode: Episode, node: Node, symbols: list[str], ranked: list[Ranked]) -> list[Ranked]:
    """The ranking an anonymized episode shows: the plain one when the factor reads the same on the shown scales
    (a ratio: it must not differ in the last digit), else the one on the shown bars (a level would name the
    stock; perturbed bars, ``anonymize_noise``, are what the model reads)."""
    import numpy as np

    from trade_tools.alpha import ranked_at_t0

    shown = ranked_at_t0(episode.view, node, symbols, lambda columns: episode.shown_columns(symbols, columns))
    if episode.settings.anonymize_noise:
        return shown
    plain, scaled = (np.array([v for _, v in sorted(r)]) for r in (ranked, shown))
    return ranked if np.allclose(plain, scaled, rtol=1e-4, equal_nan=True) else shown


class AlphaArgs(Arguments):
    expression: str = Field(
        description='Alpha158因子名（如 ROC20、KMID、RSQR60）或Qlib表达式，如 "Mean($close,5)/$close"；'
        "字段仅限 $open $high $low $close $volume，窗口为1-250的整数"
    )
    symbols: list[str] | None = Field(None, description="股票代码列表（须在股票池或持仓中）；省略时为整个股票池")


class ComputeAlphaFactor(Tool):
    name = "compute_alpha_factor"
    description = (
        "计算Alpha因子在T0的取值并在给定股票间按取值从高到低排序，结果附公式与含义。"
        "可写Alpha158因子名（族名加窗口d=5/10/20/30/60，如 ROC20）或自定义Qlib表达式。"
        "注意方向：ROCd=Ref($close,d)/$close，越大表示近d日跌得越多。各族方向：" + _GUIDE + "。"
    )
    arguments = AlphaArgs
    budget = 1200

    def run(self, episode: Episode, args: AlphaArgs) -> str:
        from trade_tools.alpha import alpha158_expressions, ranked_at_t0, resolve
        from trade_tools.expression import ExpressionError, check_work

        if args.symbols is None:
            symbols = list(episode.task.pool)
        elif not args.symbols:
            raise ToolError("symbols 不能为空；省略 symbols 即为整个股票池")
        else:
            symbols = list(dict.fromkeys(episode.check_symbol(s) for s in args.symbols))
        try:
            name, node = resolve(args.expression)
            check_work(node, len(symbols))
        except ExpressionError as error:
            raise ToolError(f"表达式被拒绝：{error.one_line()}") from None
        ranked = ranked_at_t0(episode.view, node, symbols)
        if episode.aliases:
            ranked = _as_shown(episode, node, symbols, ranked)
        label = f"Alpha158因子 {name}" if name else f"表达式 {args.expression.strip()}"
        lines = [f"## {label}（截至{episode.view.date}收盘，按取值从高到低）"]
        if name:
            lines.append(f"公式：{alpha158_expressions()[name]}；含义：{_meaning(name)}")
        for rank, (symbol, value) in enumerate(ranked, start=1):
            shown = "无数据（停牌或历史不足）" if math.isnan(value) else f"{value:.6g}"
            lines.append(f"{rank}. {symbol}: {shown}")
        return "\n".join(lines)
