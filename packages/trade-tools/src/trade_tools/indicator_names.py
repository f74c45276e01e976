"""The indicators ``get_price_data`` offers: their names, which are price levels, what each means.

Kept apart from :mod:`trade_tools.indicators`, which computes them with numpy and pandas: the tool's
description and schema list these names, and listing the tools imports neither.
"""

PRICE_LEVEL = (
    "MA5",
    "MA10",
    "MA20",
    "MA60",
    "EMA12",
    "EMA26",
    "VWAP",
    "MACD_DIF",
    "MACD_DEA",
    "MACD_HIST",
    "BOLL_UPPER",
    "BOLL_MID",
    "BOLL_LOWER",
    "ATR_14",
)
RATIOS = ("VOL_20", "ROC_5", "ROC_20", "VOL_RATIO_5_20", "RSI_14")
INDICATORS = (*PRICE_LEVEL, *RATIOS)
DESCRIPTIONS = {
    "MA5": "5日均价",
    "MA10": "10日均价",
    "MA20": "20日均价",
    "MA60": "60日均价",
    "EMA12": "12日指数均价",
    "EMA26": "26日指数均价",
    "VWAP": "5日成交量加权均价",
    "MACD_DIF": "MACD快线DIF(EMA12-EMA26)",
    "MACD_DEA": "MACD慢线DEA(DIF的9日EMA)",
    "MACD_HIST": "MACD柱(2×(DIF-DEA))",
    "BOLL_UPPER": "布林上轨(20日,2σ)",
    "BOLL_MID": "布林中轨",
    "BOLL_LOWER": "布林下轨",
    "ATR_14": "14日平均真实波幅",
    "VOL_20": "20日日收益率标准差",
    "ROC_5": "5日涨跌幅",
    "ROC_20": "20日涨跌幅",
    "VOL_RATIO_5_20": "5日/20日均量比",
    "RSI_14": "14日RSI(Wilder)",
}
