"""What the prompt and the tool descriptions tell the model about what the episode enforces."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pandas as pd
import pytest

from trade_data.store import MarketStore
from trade_data.summary import market_summary
from trade_tools.alpha import alpha158, alpha158_expressions
from trade_tools.episode import Episode, EpisodeSettings, Task
from trade_tools.indicators import INDICATORS
from trade_tools.prompts import PROMPT_SETS
from trade_tools.sampler import day_task
from trade_tools.tool import TOOLS

POOL = ["SH600519", "SZ000001", "SZ300750"]
ENGLISH = re.compile(r"[A-Za-z]{2,}")


def _description(name: str) -> str:
    return TOOLS.all()[name].schema()["function"]["description"]


@pytest.mark.parametrize("max_turns", [3, 16])
def test_system_prompt_states_the_episodes_turn_limit(open_day, max_turns: int) -> None:  # type: ignore[no-untyped-def]
    system = open_day("2024-06-14", POOL, settings=EpisodeSettings(max_turns=max_turns)).messages()[0]["content"]
    assert f"最多回复{max_turns}轮" in system
    assert f"第{max_turns}轮回复后仍未调用" in system and "截断" in system


def test_macro_default_index_is_the_market_state_index(sample_store: MarketStore) -> None:
    for index, name in [("SH000001", "上证指数"), ("SH000300", "沪深300")]:
        task = Task(task_id="t", date="2024-06-14", pool=POOL, cash=1e6, index=index)  # type: ignore[arg-type]
        day = Episode.start(task, sample_store)
        assert f"市场状态（截至2024-06-14收盘，{name}）" in day.messages()[0]["content"]
        assert day.call("get_macro_indicators", {}).startswith(f"## {name}({index}) 近20个交易日")
        assert day.call("get_macro_indicators", {"index": "sh000905"}).startswith("## 中证500(SH000905)")
    assert "市场状态" in _description("get_macro_indicators")


def test_price_tool_description_and_error_list_every_indicator(open_day) -> None:  # type: ignore[no-untyped-def]
    description = _description("get_price_data")
    assert all(name in description for name in INDICATORS)
    text = open_day("2024-06-14", POOL).call("get_price_data", {"symbol": "SH600519", "indicators": ["MACD", "RSI"]})
    assert text.startswith("错误：未知指标 MACD, RSI；可用：") and all(name in text for name in INDICATORS)


def test_alpha_description_gives_every_family_its_direction() -> None:
    from trade_tools.builtins.alpha_factor import FACTOR_GROUPS

    description = _description("compute_alpha_factor")
    assert len(description) < 600 and "ROCd=Ref($close,d)/$close，越大表示近d日跌得越多" in description
    listed = re.findall(r"[A-Z]+[0-9]*d?", description.split("各族方向：")[1])
    windows = re.search(r"d=([0-9/]+)", description).group(1).split("/")  # type: ignore[union-attr]
    names = {f"{token[:-1]}{d}" for token in listed if token.endswith("d") for d in windows}
    assert names | {token for token in listed if not token.endswith("d")} == set(alpha158())
    groups = "".join(heading[0] + "".join(zh for zh, _ in meanings.values()) for heading, meanings in FACTOR_GROUPS)
    assert not ENGLISH.findall(groups.replace("{d}", ""))


def test_every_alpha158_result_shows_its_formula_and_meaning(open_day) -> None:  # type: ignore[no-untyped-def]
    day = open_day("2024-06-14", POOL)
    for name in alpha158():
        text = day.call("compute_alpha_factor", {"expression": name.lower(), "symbols": POOL[:1]})
        header, meaning = text.splitlines()[:2]
        assert header.startswith(f"## Alpha158因子 {name}（"), text
        assert meaning.startswith(f"公式：{alpha158_expressions()[name]}；含义：") and len(meaning) < 250, meaning
        assert not ENGLISH.findall(meaning.split("；含义：")[1]), meaning


@pytest.mark.real_data
def test_roc_says_that_the_stock_that_rose_most_ranks_last(open_day) -> None:  # type: ignore[no-untyped-def]
    # five days to 2024-10-08: SZ300750 +51%, SH600519 +26%, SZ000001 +24% (adjusted closes)
    text = open_day("2024-10-08", POOL).call("compute_alpha_factor", {"expression": "ROC5", "symbols": POOL})
    lines = text.splitlines()
    assert lines[1] == "公式：Ref($close, 5)/$close；含义：5日前收盘价÷今日收盘价，越大表示近5日跌得越多"
    assert lines[-1].startswith("3. SZ300750: 0.66")


def test_the_compact_set_leaves_out_the_market_state_and_the_tool_list(synth_store: MarketStore) -> None:
    """Role, rules with the turn limit and a three-step workflow; the user message is the default one."""
    task = day_task(synth_store, "2020-05-06", pool_size=5, seed=3)
    default = Episode.start(task, synth_store).messages()
    compact = Episode.start(task.model_copy(update={"prompt_set": "compact"}), synth_store).messages()
    assert "市场状态" in default[0]["content"] and "## 可用工具" in default[0]["content"]
    system = compact[0]["content"]
    assert "市场状态" not in system and "## 可用工具" not in system and "compute_alpha_factor" not in system
    assert system.startswith(
        "【合成数据】你是一名A股量化交易分析师"
    )  # a synthetic market says so, as the summary would
    assert "## 交易规则" in system and "最多回复16轮" in system
    assert '3. 最后必须调用 TakeAction(type="stop")' in system and "4. " not in system
    assert len(system) < len(default[0]["content"]) / 2
    assert compact[1] == default[1]
    assert "compact" in PROMPT_SETS.all() and PROMPT_SETS.get("default").system is not PROMPT_SETS.get("compact").system


def ex_dates(store: MarketStore) -> dict[dt.date, list[str]]:
    """Every day a stock traded with another adjustment factor than on its last traded day, and those stocks."""
    factor = np.where(store.traded, store.factor, np.nan)
    before = pd.DataFrame(factor).ffill().shift(1).to_numpy()
    with np.errstate(invalid="ignore"):
        rows, columns = np.nonzero(store.traded & (np.abs(factor / before - 1) > 1e-9))
    found: dict[dt.date, list[str]] = {}
    for t, j in zip(rows, columns, strict=True):
        found.setdefault(store.calendar[t].date(), []).append(store.symbols[j])
    return found


LAST_TWO = re.compile(r"收(\d+\.\d\d) \S+ \| \S+ 收(\d+\.\d\d) (\S+)$", re.M)


@pytest.mark.real_data
@pytest.mark.slow
def test_cost_basis_and_prices_are_on_one_basis_on_every_ex_date(sample_store: MarketStore) -> None:
    """On an ex-date the raw previous close is above T0's prices by the dividend: as a cost basis it read as a
    loss (SZ000001 on 2024-06-14: 成本10.80 beside 收盘10.18, while get_price_data showed the day +0.99%). A holding
    bought at the previous close costs what get_price_data shows as that close, and its P&L has the day's sign."""
    days = ex_dates(sample_store)
    assert sum(map(len, days.values())) > 4000  # every ex-date of the sample
    for date, symbols in days.items():
        task = Task(task_id="t", date=date, pool=symbols, holdings=dict.fromkeys(symbols, 100), cash=1e6)
        day = Episode.start(task, sample_store)
        user = day.messages()[1]["content"]
        for symbol in symbols:
            shown_before, shown_close, mark = LAST_TWO.search(day.call("get_price_data", {"symbol": symbol})).groups()
            line = re.search(rf"- {symbol}：.*成本(\d+\.\d\d)，T0收盘(\d+\.\d\d)", user)
            assert line is not None and line.groups() == (shown_before, shown_close), (date, symbol)
            gain = float(shown_close) - float(shown_before)  # 0 here: a change under half a cent, either sign
            assert gain == 0 or mark == "→0.00%" or mark[0] == ("↑" if gain > 0 else "↓"), (date, symbol, mark)


@pytest.mark.parametrize("market", ["synth_store", "sample_store"])
@pytest.mark.parametrize("anonymized", [False, True])
def test_the_prompts_market_state_is_what_the_bars_say_on_every_day(market: str, anonymized: bool, request) -> None:  # type: ignore[no-untyped-def]
    """The summary read from the dataset's precomputed rows puts the same text in the prompt, plain and
    anonymized, as the summary computed from the day's bars."""
    store: MarketStore = request.getfixturevalue(market)
    rng = np.random.default_rng(7)
    for day in [store.calendar[1], *rng.choice(store.calendar[20:], size=25, replace=False)]:
        task = day_task(store, pd.Timestamp(day).date(), pool_size=5, seed=1).model_copy(
            update={"anonymized": anonymized}
        )
        episode = Episode.start(task, store)
        computed = market_summary(episode.view, index=task.index, universe=task.universe, precomputed=False)
        assert "## " + episode.hide(computed.to_text(coarse=anonymized)) + "\n\n" in episode.messages()[0]["content"]
