"""What the info tools say, checked against hand calculations on the raw table."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from trade_data.store import MarketStore
from trade_tools import text
from trade_tools.episode import Episode
from trade_tools.sampler import day_task
from trade_tools.text import MAX_PERIOD

POOL = ["SH600519", "SZ000001", "SZ300750"]


def _traded(table: pd.DataFrame, symbol: str, until: str) -> pd.DataFrame:
    rows = table[(table["symbol"] == symbol) & (table["date"] <= until) & (table["volume"] > 0)]
    return rows.reset_index(drop=True)


def _value(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(f"- {name}: "))
    return float(line.split(": ")[1].split("（")[0].rstrip("%"))


@pytest.mark.real_data
def test_price_data_latest_bar_and_indicators(open_day, sample_table: pd.DataFrame) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL)
    names = ["MA5", "MA20", "MA60", "EMA12", "MACD_DIF", "RSI_14", "BOLL_UPPER", "VOL_20", "ROC_5", "VOL_RATIO_5_20"]
    text = day.call("get_price_data", {"symbol": "SH600519", "period": "20d", "indicators": names})
    rows = _traded(sample_table, "SH600519", "2024-06-14")
    adjusted = rows["close"] * rows["factor"]
    to_t0 = adjusted / rows["factor"].iloc[-1]  # forward-adjusted to T0's price scale
    assert "最新：2024-06-14 开1555.00 高1563.96 低1520.46 收1555.00 量5.95万手" in text
    assert _value(text, "MA5") == pytest.approx(to_t0.tail(5).mean(), abs=0.006)
    assert _value(text, "MA20") == pytest.approx(to_t0.tail(20).mean(), abs=0.006)
    assert _value(text, "MA60") == pytest.approx(to_t0.tail(60).mean(), abs=0.006)
    assert _value(text, "EMA12") == pytest.approx(to_t0.ewm(span=12, adjust=False).mean().iloc[-1], abs=0.006)
    dif = to_t0.ewm(span=12, adjust=False).mean() - to_t0.ewm(span=26, adjust=False).mean()
    assert _value(text, "MACD_DIF") == pytest.approx(dif.iloc[-1], abs=0.0006)
    delta = to_t0.diff()
    gain = delta.clip(lower=0).ewm(alpha=1 / 14, adjust=False).mean()
    loss = (-delta.clip(upper=0)).ewm(alpha=1 / 14, adjust=False).mean()
    assert _value(text, "RSI_14") == pytest.approx((100 - 100 / (1 + gain / loss)).iloc[-1], abs=0.06)
    upper = to_t0.tail(20).mean() + 2 * to_t0.tail(20).std(ddof=0)
    assert _value(text, "BOLL_UPPER") == pytest.approx(upper, abs=0.006)
    assert _value(text, "VOL_20") / 100 == pytest.approx(adjusted.pct_change().tail(20).std(), abs=6e-5)
    assert _value(text, "ROC_5") / 100 == pytest.approx(adjusted.iloc[-1] / adjusted.iloc[-6] - 1, abs=6e-5)
    volume = rows["volume"]
    assert _value(text, "VOL_RATIO_5_20") == pytest.approx(volume.tail(5).mean() / volume.tail(20).mean(), abs=0.006)
    high20 = (rows["high"] * rows["factor"] / rows["factor"].iloc[-1]).tail(20)
    assert f"最高{high20.max():.2f}" in text


def _move(change: float) -> str:
    """A daily move as the tool marks it, written out here: arrow and size."""
    return ("↑" if change > 0 else "↓") + f"{abs(change):.2%}"


def test_price_data_across_an_ex_dividend_date_has_no_fake_drop(open_day, sample_table: pd.DataFrame) -> None:  # type: ignore[no-untyped-def]
    rows = _traded(sample_table, "SZ000001", "2025-12-31")
    raw = rows["close"] / rows["close"].shift() - 1
    true = (rows["close"] * rows["factor"]).pct_change()
    steps = np.flatnonzero(rows["factor"].diff().to_numpy() > 0)
    step = int(steps[np.argmax(np.abs(raw - true).to_numpy()[steps])])  # the ex-day that tells them apart most
    raw_move, true_move = raw[step], true[step]
    assert _move(raw_move) != _move(true_move)  # a tool showing raw moves cannot pass
    text = open_day(rows.loc[step + 2, "date"].date(), ["SZ000001"]).call(
        "get_price_data", {"symbol": "SZ000001", "period": "5d"}
    )
    line = next(part for part in text.split(" | ") if f"{rows.loc[step, 'date']:%m-%d} 收" in part)
    assert _move(true_move) in line and _move(raw_move) not in line


def test_alpha_factor_shows_no_period_argument(open_day) -> None:  # type: ignore[no-untyped-def]
    """A factor's value at T0 is fixed by its own windows: a period would change nothing, so the schema shows none
    (the reference's ``period`` is still accepted: test_reference_calls.py)."""
    day = open_day("2024-06-14", POOL)
    schema = next(s["function"] for s in day.tool_schemas() if s["function"]["name"] == "compute_alpha_factor")
    assert set(schema["parameters"]["properties"]) == {"expression", "symbols"}


def _ranked(text: str) -> list[str]:
    """The symbols of a factor ranking, in the order shown."""
    return re.findall(r"^\d+\. (\w+): ", text, flags=re.MULTILINE)


def test_alpha_factor_symbols_may_be_left_out_for_the_whole_pool(synth_store: MarketStore) -> None:
    """Only the expression is required: without symbols (or with null) the ranking is the pool's, the text the
    same as naming every pool stock; a held stock outside the pool is not added."""
    task = day_task(synth_store, "2020-05-06", pool_size=6, seed=2)
    outside = next(s for s in synth_store.asof(task.date).members("csi300") if s not in task.pool)
    day = Episode.start(task.model_copy(update={"holdings": {outside: 100}}), synth_store)
    schema = next(s["function"] for s in day.tool_schemas() if s["function"]["name"] == "compute_alpha_factor")
    assert schema["parameters"]["required"] == ["expression"]
    assert schema["parameters"]["properties"]["symbols"]["type"] == "array"
    assert "省略时为整个股票池" in schema["parameters"]["properties"]["symbols"]["description"]
    assert "compute_alpha_factor(expression: string, symbols: array（可选）)" in day.messages()[0]["content"]
    whole = day.call("compute_alpha_factor", {"expression": "KMID"})
    assert sorted(_ranked(whole)) == sorted(task.pool)
    assert day.call("compute_alpha_factor", {"expression": "KMID", "symbols": task.pool}) == whole
    assert day.call("compute_alpha_factor", '{"expression": "KMID", "symbols": null}') == whole
    assert _ranked(day.call("compute_alpha_factor", {"expression": "KMID", "symbols": [outside]})) == [outside]
    assert day.tool_errors == 0


def test_alpha_factor_empty_symbols_is_an_error_in_chinese(synth_store: MarketStore) -> None:
    day = Episode.start(day_task(synth_store, "2020-05-06", pool_size=6, seed=2), synth_store)
    text = day.call("compute_alpha_factor", {"expression": "KMID", "symbols": []})
    assert text == "错误：symbols 不能为空；省略 symbols 即为整个股票池"
    assert day.tool_errors == 1 and day.internal_errors == 0


@pytest.mark.real_data
def test_suspended_stock_says_so(open_day) -> None:  # type: ignore[no-untyped-def]
    text = open_day("2024-07-22", ["SH600027"]).call("get_price_data", {"symbol": "SH600027"})
    assert "今日停牌（最后交易日2024-07-18）" in text.splitlines()[0]


@pytest.mark.real_data
def test_macro_change_and_volatility(open_day, sample_table: pd.DataFrame) -> None:  # type: ignore[no-untyped-def]
    text = open_day("2025-09-11", POOL).call("get_macro_indicators", {"index": "SH000300", "period": "60d"})
    closes = _traded(sample_table, "SH000300", "2025-09-11")["close"].tail(61).reset_index(drop=True)
    assert "沪深300(SH000300) 近60个交易日（截至2025-09-11收盘）" in text
    assert f"收{closes.iloc[-1]:.2f}" in text and "收4548.03" in text
    assert f"区间涨跌{closes.iloc[-1] / closes.iloc[0] - 1:+.2%}" in text
    assert f"日波动率{closes.pct_change().std():.2%}" in text


def _last_days(text: str) -> list[tuple[str, float, float]]:
    """The "近5日" line as (MM-DD, close, change), change NaN where it shows "-"."""
    line = next(line for line in text.splitlines() if line.startswith("近5日："))
    days = []
    for part in line.removeprefix("近5日：").split(" | "):
        date, close, mark = part.replace("收", "").split(" ")
        sign = {"↑": 1, "↓": -1, "→": 0}.get(mark[0])
        days.append((date, float(close), np.nan if sign is None else sign * float(mark[1:-1]) / 100))
    return days


def _check_period(text: str, closes: pd.Series, dates: pd.Series, period: int) -> None:
    """Latest change, period change and the last five days against adjusted closes (oldest first)."""
    moves = closes.pct_change()
    assert f" 近{period}个交易日" in text.splitlines()[0], text
    latest = re.search(r"涨跌([+-][\d.]+)%", text.splitlines()[1])
    assert latest and float(latest.group(1)) / 100 == pytest.approx(moves.iloc[-1], abs=6e-5), text
    change = float(re.search(r"区间涨跌([+-][\d.]+)%", text).group(1)) / 100  # type: ignore[union-attr]
    assert change == pytest.approx(closes.iloc[-1] / closes.iloc[-1 - period] - 1, abs=6e-5), (period, text)
    shown = _last_days(text)
    assert [d for d, _, _ in shown] == [f"{d:%m-%d}" for d in dates.tail(5)], (period, text)
    assert [c for _, c, _ in shown] == pytest.approx(closes.tail(5).to_list(), abs=0.006)
    assert [m for _, _, m in shown] == pytest.approx(moves.tail(5).to_list(), abs=6e-5), (period, text)


def test_macro_every_period_against_the_raw_closes(open_day, sample_table: pd.DataFrame) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2025-09-11", POOL)
    rows = _traded(sample_table, "SH000300", "2025-09-11")
    closes = rows["close"] * rows["factor"]
    for period in range(1, MAX_PERIOD + 1):
        text = day.call("get_macro_indicators", {"index": "SH000300", "period": f"{period}d"})
        _check_period(text, closes, rows["date"], period)
        window = closes.tail(period)
        volatility = re.search(r"日波动率([\d.]+%|-)", text).group(1)  # type: ignore[union-attr]
        if period == 1:
            assert volatility == "-"
        else:
            assert float(volatility[:-1]) / 100 == pytest.approx(closes.pct_change().tail(period).std(), abs=6e-5)
        high, low = window.idxmax(), window.idxmin()
        assert f"区间收盘最高{window[high]:.2f}({rows['date'][high]:%Y-%m-%d})" in text, (period, text)
        assert f"最低{window[low]:.2f}({rows['date'][low]:%Y-%m-%d})" in text, (period, text)


def test_price_every_period_against_the_raw_table(open_day, sample_table: pd.DataFrame) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL)
    rows = _traded(sample_table, "SZ000001", "2024-06-14")
    scale = rows["factor"] / rows["factor"].iloc[-1]  # forward-adjusted to T0's price scale
    closes, highs, lows = rows["close"] * scale, rows["high"] * scale, rows["low"] * scale
    for period in range(1, MAX_PERIOD + 1):
        text = day.call("get_price_data", {"symbol": "SZ000001", "period": f"{period}d", "indicators": []})
        _check_period(text, closes, rows["date"], period)
        high, low = highs.tail(period).idxmax(), lows.tail(period).idxmin()
        assert f"最高{highs[high]:.2f}({rows['date'][high]:%Y-%m-%d})" in text, (period, text)
        assert f"最低{lows[low]:.2f}({rows['date'][low]:%Y-%m-%d})" in text, (period, text)


def test_a_change_that_rounds_to_zero_has_no_sign() -> None:
    """A -0.0006% day read ``涨跌-0.00%`` (and ``↓0.00%``): a loss where there is none."""
    for tiny in (-0.000006, 0.000006, -0.00004999, 0.0):
        assert (text.pct(tiny), text.mark(tiny)) == ("0.00%", "→0.00%"), tiny
    assert (text.pct(-0.0001), text.mark(-0.0001)) == ("-0.01%", "↓0.01%")
    assert (text.pct(0.0123), text.mark(0.0123)) == ("+1.23%", "↑1.23%")
