"""``compute_alpha_factor``: a named Alpha158 factor or a whitelisted Qlib expression, ranked at T0."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from trade_tools import text
from trade_tools.text import say
from trade_tools.tool import Arguments, Tool, ToolError

if TYPE_CHECKING:
    from trade_tools.episode import Episode
    from trade_tools.expression import Node

FACTOR_GROUPS: tuple[tuple[tuple[str, str], dict[str, tuple[str, str]]], ...] = (
    (
        (
            "越大表示今日收盘相对越低（价格÷今日收盘价）",
            "higher = today's close relatively lower (price / today's close)",
        ),
        {
            "ROC": (
                "{d}日前收盘价÷今日收盘价，越大表示近{d}日跌得越多",
                "close {d} days ago / today's close; higher = fell more over {d} days",
            ),
            "MA": (
                "{d}日均价÷今日收盘价，越大表示收盘越低于均线",
                "{d}-day mean / today's close; higher = close further below it",
            ),
            "MAX": (
                "{d}日最高价÷今日收盘价，越大表示离{d}日高点越远",
                "{d}-day high / today's close; higher = further below the high",
            ),
            "MIN": (
                "{d}日最低价÷今日收盘价，越大表示越接近{d}日低点",
                "{d}-day low / today's close; higher = nearer the low",
            ),
            "QTLU": (
                "{d}日收盘价的80%分位÷今日收盘价，越大表示收盘越低",
                "80% quantile of {d}-day closes / today's close; higher = lower close",
            ),
            "QTLD": (
                "{d}日收盘价的20%分位÷今日收盘价，越大表示收盘越低",
                "20% quantile of {d}-day closes / today's close; higher = lower close",
            ),
            "OPEN0": (
                "今日开盘价÷收盘价，越大表示当日从开盘跌得越多",
                "today's open / close; higher = fell more from the open",
            ),
            "HIGH0": (
                "今日最高价÷收盘价，越大表示收盘离当日高点越远",
                "today's high / close; higher = close further below the high",
            ),
            "LOW0": (
                "今日最低价÷收盘价，越大表示收盘越接近当日低点",
                "today's low / close; higher = close nearer the low",
            ),
        },
    ),
    (
        ("越大表示涨势越强或位置越高", "higher = stronger rise or higher position"),
        {
            "KMID": ("(收盘-开盘)÷开盘，越大表示当日涨得越多", "(close-open)/open; higher = rose more today"),
            "KMID2": (
                "(收盘-开盘)÷(最高-最低)，越大表示阳线实体越饱满",
                "(close-open)/(high-low); higher = fuller up-candle body",
            ),
            "KSFT": (
                "(2×收盘-最高-最低)÷开盘，越大表示收盘越靠近当日高点",
                "(2*close-high-low)/open; higher = close nearer the high",
            ),
            "KSFT2": (
                "(2×收盘-最高-最低)÷(最高-最低)，越大表示收盘越靠近当日高点",
                "(2*close-high-low)/(high-low); higher = close nearer the high",
            ),
            "RSV": (
                "(今日收盘-{d}日最低)÷({d}日最高-{d}日最低)，0到1，越大表示越接近{d}日高点",
                "(close - {d}-day low)/({d}-day high - {d}-day low), 0 to 1; higher = nearer the {d}-day high",
            ),
            "RANK": (
                "今日收盘价在{d}日收盘价中的分位，越大表示位置越高",
                "percentile of today's close among {d}-day closes; higher = higher position",
            ),
            "BETA": (
                "{d}日收盘价线性回归斜率÷今日收盘价，越大表示上升趋势越陡",
                "slope of a {d}-day linear fit of closes / today's close; higher = steeper uptrend",
            ),
            "RESI": (
                "今日收盘价偏离{d}日回归线的残差÷今日收盘价，越大表示越高于趋势线",
                "residual of today's close from the {d}-day fit / today's close; higher = further above trend",
            ),
            "IMAX": (
                "{d}日最高价出现的位置÷{d}（1为今日），越大表示高点越近",
                "position of the {d}-day high / {d} (1 = today); higher = more recent high",
            ),
            "IMXD": (
                "({d}日最高价位置-最低价位置)÷{d}，为正表示先见低点后见高点",
                "(position of the {d}-day high - of the low)/{d}; positive = low came first, then high",
            ),
            "CNTP": ("{d}日中上涨天数的占比", "share of up days in {d} days"),
            "CNTD": ("{d}日中上涨天数占比减下跌天数占比", "share of up days minus share of down days in {d} days"),
            "SUMP": (
                "{d}日涨幅之和÷涨跌幅绝对值之和，越大表示上涨越占优",
                "{d}-day sum of gains / sum of absolute changes; higher = gains dominate",
            ),
            "SUMD": (
                "{d}日(涨幅之和-跌幅之和)÷涨跌幅绝对值之和，越大表示上涨越占优",
                "{d}-day (gains - losses) / sum of absolute changes; higher = gains dominate",
            ),
        },
    ),
    (
        ("越大表示跌势越强", "higher = stronger fall"),
        {
            "CNTN": ("{d}日中下跌天数的占比", "share of down days in {d} days"),
            "SUMN": (
                "{d}日跌幅之和÷涨跌幅绝对值之和，越大表示下跌越占优",
                "{d}-day sum of losses / sum of absolute changes; higher = losses dominate",
            ),
            "IMIN": (
                "{d}日最低价出现的位置÷{d}（1为今日），越大表示低点越近",
                "position of the {d}-day low / {d} (1 = today); higher = more recent low",
            ),
        },
    ),
    (
        ("波动与影线（不分涨跌）", "volatility and shadows (either direction)"),
        {
            "KLEN": ("(最高-最低)÷开盘，即当日振幅", "(high-low)/open: the day's range"),
            "KUP": ("上影线÷开盘，越大表示冲高回落越多", "upper shadow / open; higher = more pullback from the high"),
            "KUP2": (
                "上影线÷(最高-最低)，越大表示冲高回落越多",
                "upper shadow/(high-low); higher = more pullback from the high",
            ),
            "KLOW": ("下影线÷开盘，越大表示探底回升越多", "lower shadow / open; higher = more rebound from the low"),
            "KLOW2": (
                "下影线÷(最高-最低)，越大表示探底回升越多",
                "lower shadow/(high-low); higher = more rebound from the low",
            ),
            "STD": (
                "{d}日收盘价标准差÷今日收盘价，越大表示波动越大",
                "std of {d}-day closes / today's close; higher = more volatile",
            ),
            "RSQR": (
                "{d}日收盘价对时间回归的R²，越大表示走势越接近直线（不论涨跌）",
                "R² of {d}-day closes against time; higher = closer to a straight line (up or down)",
            ),
        },
    ),
    (
        ("越大表示今日越缩量（÷今日成交量）", "higher = lower volume today (/ today's volume)"),
        {
            "VMA": (
                "{d}日均量÷今日成交量，越大表示今日越缩量",
                "{d}-day mean volume / today's volume; higher = lower volume today",
            ),
            "VSTD": (
                "{d}日成交量标准差÷今日成交量，越大表示今日量相对越小",
                "std of {d}-day volume / today's volume; higher = today's volume relatively smaller",
            ),
        },
    ),
    (
        ("量价关系", "price and volume"),
        {
            "WVMA": (
                "{d}日量乘绝对涨跌幅的变异系数，越大表示量价波动越不稳定",
                "{d}-day coefficient of variation of volume x |change|; higher = less stable price-volume",
            ),
            "VSUMP": (
                "{d}日量增之和÷量变绝对值之和，越大表示放量越占优",
                "{d}-day sum of volume rises / sum of absolute volume changes; higher = rising volume dominates",
            ),
            "VSUMN": (
                "{d}日量减之和÷量变绝对值之和，越大表示缩量越占优",
                "{d}-day sum of volume falls / sum of absolute volume changes; higher = falling volume dominates",
            ),
            "VSUMD": (
                "{d}日(量增之和-量减之和)÷量变绝对值之和，越大表示放量越占优",
                "{d}-day (volume rises - falls) / sum of absolute volume changes; higher = rising volume dominates",
            ),
            "CORR": (
                "收盘价与对数成交量的{d}日相关系数，越大表示价量越同向",
                "{d}-day correlation of close and log volume; higher = price and volume move together",
            ),
            "CORD": (
                "日涨跌与日量变的{d}日相关系数，越大表示越是涨时放量、跌时缩量",
                "{d}-day correlation of daily price and volume changes; higher = more volume on up days, less on down",
            ),
        },
    ),
)
"""Alpha158's factor families by the direction of their value, each with its meaning ({d}: the window), in
Chinese and English.

Most of Qlib's price factors divide by today's close, so their value runs against their name
(ROC5 = Ref($close, 5)/$close is largest for the stock that fell most): the model must be told.
"""
_MEANINGS = {family: meaning for _, group in FACTOR_GROUPS for family, meaning in group.items()}


def _guide(language: int) -> str:
    """Each family's direction, in Chinese (``language`` 0) or English (1)."""
    colon, comma, semicolon = ("：", "、", "；") if language == 0 else (": ", ", ", "; ")
    return semicolon.join(
        heading[language]
        + colon
        + comma.join(family + ("d" if "{d}" in meaning[0] else "") for family, meaning in group.items())
        for heading, group in FACTOR_GROUPS
    )


def _meaning(name: str) -> str:
    """What an Alpha158 factor's value says, its window filled in (ROC5: 5日前收盘价÷...)."""
    if name in _MEANINGS:
        return say(*_MEANINGS[name])
    family, window = re.fullmatch(r"([A-Z]+)(\d+)", name).groups()  # type: ignore[union-attr]
    return say(*_MEANINGS[family]).format(d=window)


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
        "字段仅限 $open $high $low $close $volume，窗口为1-250的整数",
        json_schema_extra={
            "en": 'Alpha158 factor name (e.g. ROC20, KMID, RSQR60) or a Qlib expression, e.g. "Mean($close,5)/$close"; '
            "fields: $open $high $low $close $volume only; windows: integers 1-250"
        },
    )
    symbols: list[str] | None = Field(
        None,
        description="股票代码列表（须在股票池或持仓中）；省略时为整个股票池",
        json_schema_extra={"en": "stock codes (in the pool or held); omitted: the whole pool"},
    )
    period: SkipJsonSchema[str] = Field("60d")
    """The reference implementation's argument (Qlib data loaded from T0 - period, default 60d), so a model trained
    on it plays here: checked as the other tools' ``period`` and not shown in the schema, since the value at T0
    reads the rows its windows need and is the same for any period."""


class ComputeAlphaFactor(Tool):
    name = "compute_alpha_factor"
    description = (
        "计算Alpha因子在T0的取值并在给定股票间按取值从高到低排序，结果附公式与含义。"
        "可写Alpha158因子名（族名加窗口d=5/10/20/30/60，如 ROC20）或自定义Qlib表达式。"
        "注意方向：ROCd=Ref($close,d)/$close，越大表示近d日跌得越多。各族方向：" + _guide(0) + "。"
    )
    description_en = (
        "Value an alpha factor at T0 and rank the stocks high to low, with its formula and meaning. Write an "
        "Alpha158 name (family plus window d=5/10/20/30/60, e.g. ROC20) or a Qlib expression. Mind the direction: "
        "ROCd=Ref($close,d)/$close, higher = fell more over d days. Directions by family: " + _guide(1) + "."
    )
    languages = ("zh", "en")
    arguments = AlphaArgs
    budget = 1200

    def run(self, episode: Episode, args: AlphaArgs) -> str:
        from trade_tools.alpha import alpha158_expressions, ranked_at_t0, resolve
        from trade_tools.expression import ExpressionError, check_work

        text.parse_period(args.period)
        if args.symbols is None:
            symbols = list(episode.task.pool)
        elif not args.symbols:
            raise ToolError(
                say(
                    "symbols 不能为空；省略 symbols 即为整个股票池",
                    "symbols must not be empty; omit it for the whole pool",
                )
            )
        else:
            symbols = list(dict.fromkeys(episode.check_symbol(s) for s in args.symbols))
        try:
            name, node = resolve(args.expression)
            check_work(node, len(symbols))
        except ExpressionError as error:
            raise ToolError(say("表达式被拒绝：", "expression refused: ") + error.one_line()) from None
        ranked = ranked_at_t0(episode.view, node, symbols)
        if episode.aliases:
            ranked = _as_shown(episode, node, symbols, ranked)
        label = (
            say("Alpha158因子 ", "Alpha158 factor ") + name
            if name
            else say("表达式 ", "expression ") + args.expression.strip()
        )
        date = episode.view.date
        lines = [say(f"## {label}（截至{date}收盘，按取值从高到低）", f"## {label} (at the {date} close, high to low)")]
        if name:
            formula, meaning = alpha158_expressions()[name], _meaning(name)
            lines.append(say(f"公式：{formula}；含义：{meaning}", f"Formula: {formula}; meaning: {meaning}"))
        missing = say("无数据（停牌或历史不足）", "no data (suspended or too little history)")
        for rank, (symbol, value) in enumerate(ranked, start=1):
            shown = missing if math.isnan(value) else f"{value:.6g}"
            lines.append(f"{rank}. {symbol}: {shown}")
        return "\n".join(lines)
