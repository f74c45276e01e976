"""The memorisation guard: in an anonymized episode no text the model reads names a real symbol or a calendar
date (prompts, tool schemas, every tool's answers and errors, the market summary), the trades still run on the
real stocks, and the mapping travels with the episode so a report can reverse it. The data has no company
names, so symbols and dates are the keys a model could recognise."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from trade_core.testing import run_trade
from trade_data.qlib_dir import DatasetMeta, read_calendar_file, read_instruments_file, write_dataset
from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_data.testing import perturb_future
from trade_tools.anonymize import INDEX_LEVEL, OTHER_SYMBOL, hide_schemas
from trade_tools.day import TradingDay
from trade_tools.episode import Episode, Task
from trade_tools.indicators import INDICATORS
from trade_tools.sampler import day_task
from trade_tools.tool import TOOLS
from trade_tools.trajectory import read_trajectories, write_trajectories

DATES = ["2018-03-01", "2023-08-28", "2025-06-19"]
HOSTILE = "SH600519 sz000001 600519 2025-06-19 2025-6-9 2025.06.19 20250619 2025/06/19 2025年6月19日 贵州茅台 " * 30
LEAKS = [
    re.compile(r"(?<![A-Za-z])(?:SH|SZ|BJ)\d{6}", re.IGNORECASE),
    re.compile(r"(?<!\d)(?:19|20)\d{2}\s*(?:[-/]\s*\d{1,2}|\.\d{1,2}\.\d{1,2}|年)"),
    re.compile(r"(?<!\d)(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])(?!\d)"),
    re.compile(r"(?<![\d.,])(?:201[89]|202[0-5])(?![\d.,手股元个%])"),
    re.compile(r"(?<![\d-])(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)"),
]
"""A real-looking code, a calendar date in any usual form (also MM-DD), a year of the data as a token."""
_BARE_CODE = re.compile(r"(?<![\d.,])(\d{6})(?![\d.,股元手])")


def leaks(text: str, store: MarketStore) -> list[str]:
    """Everything in ``text`` that names a real symbol (with or without its prefix) or a date."""
    codes = {s[2:] for s in store.symbols}
    found = [m.group(0) for pattern in LEAKS for m in pattern.finditer(text)]
    return found + [m.group(1) for m in _BARE_CODE.finditer(text) if m.group(1) in codes]


def anonymized(store: MarketStore, date: str, seed: int = 0, **kwargs: Any) -> Episode:
    task = day_task(store, date, pool_size=12, seed=seed, **kwargs)
    return Episode.start(task.model_copy(update={"anonymized": True}), store)


def every_call(episode: Episode) -> list[tuple[str, Any]]:
    """Every tool with a spread of arguments: valid aliases, every indicator and several periods, named factors
    and expressions, real symbols and dates typed by the model, hostile input, orders, the stop and after it."""
    alias = episode.aliases.symbols  # type: ignore[union-attr]
    pool, held = [alias[s] for s in episode.task.pool], [alias[s] for s in episode.task.holdings]
    real = episode.task.pool[0]
    indices = [alias[i] for i in episode.view.indices()]
    calls: list[tuple[str, Any]] = [
        *[("get_price_data", {"symbol": pool[0], "period": p, "indicators": INDICATORS}) for p in ("1", "5d", "250d")],
        *[("get_price_data", {"symbol": s, "period": "60d"}) for s in pool[1:]],
        *[("get_price_data", {"symbol": s}) for s in (real, real.lower(), real[2:], "XYZ", HOSTILE, "")],
        ("get_price_data", {"symbol": pool[0], "period": HOSTILE}),
        ("get_price_data", {"symbol": pool[0], "indicators": ["MA5", HOSTILE]}),
        *[("get_macro_indicators", {"index": i, "period": p}) for i in (None, *indices) for p in ("5d", "60d", "250")],
        *[("get_macro_indicators", {"index": i}) for i in ("SH000300", "000300", "沪深300", HOSTILE)],
        *[
            ("compute_alpha_factor", {"expression": e, "symbols": pool})
            for e in ("KMID", "ROC20", "RSQR60", "CORD30", "IMAX60", "Mean($close,5)/Ref($close,10)", HOSTILE)
        ],
        ("compute_alpha_factor", {"expression": "Ref($close, 20250619)", "symbols": pool}),
        ("compute_alpha_factor", {"expression": "KMID", "symbols": [*pool[:2], real]}),
        ("TakeAction", {"type": "buy", "symbol": pool[0], "amount": 100, "reasoning": HOSTILE[:1500]}),
        ("TakeAction", {"type": "buy", "symbol": real, "amount": 100}),
        ("TakeAction", {"type": "buy", "symbol": pool[1], "amount": 10**9}),
        ("TakeAction", {"type": "buy", "symbol": HOSTILE, "amount": 100}),
        ("TakeAction", {"type": "sell", "symbol": pool[-1], "amount": 100}),
        *[("TakeAction", {"type": "sell", "symbol": alias[s], "amount": n}) for s, n in episode.task.holdings.items()],
        ("TakeAction", {"type": "sell", "symbol": held[0] if held else pool[0], "amount": 100}),
        (HOSTILE, {}),
        ("get_price_data", "{not json"),
        ("get_price_data", json.dumps({"date": "2025-06-19", "symbol": pool[0]})),
        ("get_price_data", {real: 1, "symbol": pool[0]}),
        ("get_price_data", [real]),
        ("TakeAction", {"type": "stop", "reasoning": HOSTILE[:1000]}),
        ("get_price_data", {"symbol": pool[0]}),
    ]
    return calls


@pytest.mark.parametrize("date", DATES)
def test_no_real_symbol_or_date_reaches_the_model(date: str, sample_store: MarketStore) -> None:
    episode = anonymized(sample_store, date, seed=3)
    texts = [m["content"] for m in episode.messages()] + [json.dumps(episode.tool_schemas(), ensure_ascii=False)]
    answers = [episode.call(name, arguments) for name, arguments in every_call(episode)]
    for text in texts + answers:
        assert not leaks(text, sample_store), (leaks(text, sample_store), text)
    assert episode.internal_errors == 0
    assert not answers[0].startswith("错误") and answers[0].count("- ") >= len(INDICATORS)
    assert "市场状态（截至T0收盘" in texts[0] and f"收{INDEX_LEVEL:.2f}" in answers[len(episode.task.pool) + 13]


def test_every_board_reads_as_its_board(sample_store: MarketStore) -> None:
    """The price limits depend on the board, so the alias keeps it (and nothing else of the code)."""
    view = sample_store.asof("2025-06-19")
    pool = [next(s for s in view.members("csi300") if board_of(s) is board) for board in (Board.MAIN, Board.CHINEXT)]
    pool += [next(s for s in view.members("csi300") if board_of(s) is Board.STAR)]
    episode = anonymized(sample_store, "2025-06-19", pool=pool)
    assert [episode.aliases.symbols[s][:-3] for s in pool] == ["主板", "创业板", "科创板"]  # type: ignore[union-attr]
    assert all(re.fullmatch(r"\D+\d{3}", episode.aliases.symbols[s]) for s in pool)  # type: ignore[union-attr]


def test_lists_follow_the_aliases_not_the_codes(sample_store: MarketStore) -> None:
    """Listed in code order, the aliases would tell SH from SZ stocks (SH600... sorts before SZ000...)."""
    episode = anonymized(sample_store, "2024-06-14", seed=1)
    pool = episode.messages()[1]["content"].split("只）：")[1].splitlines()[0].split(", ")
    assert pool == sorted(episode.aliases.symbols[s] for s in episode.task.pool)  # type: ignore[union-attr]
    error = episode.call("get_price_data", {"symbol": "nothing"})
    assert error.endswith(", ".join(pool[:8]) + " 等")


def test_a_real_symbol_does_not_trade_and_an_alias_trades_the_real_stock(sample_store: MarketStore) -> None:
    plain = Episode.start(day_task(sample_store, "2024-06-14", pool_size=12, seed=1), sample_store)
    episode = anonymized(sample_store, "2024-06-14", seed=1)
    symbol = episode.task.pool[2]
    refused = episode.call("TakeAction", {"type": "buy", "symbol": symbol, "amount": 100})
    assert refused.startswith(f"订单被拒绝：{OTHER_SYMBOL} 不在股票池中") and episode.cash == plain.cash
    assert episode.call("get_price_data", {"symbol": symbol}).startswith(f"错误：{OTHER_SYMBOL} 不在股票池中")
    units = math.ceil(100 / episode.price_scale(symbol))  # one real lot's worth of units
    episode.call("TakeAction", {"type": "buy", "symbol": episode.aliases.symbols[symbol], "amount": units})  # type: ignore[union-attr]
    plain.call("TakeAction", {"type": "buy", "symbol": symbol, "amount": 100})
    assert episode.actions[-1].fill == plain.actions[-1].fill and episode.actions[-1].fill.symbol == symbol  # type: ignore[union-attr]
    assert episode.positions == plain.positions and episode.cash == plain.cash


def test_the_same_task_gets_the_same_aliases_and_another_task_others(sample_store: MarketStore) -> None:
    first, again = anonymized(sample_store, "2024-06-14", seed=1), anonymized(sample_store, "2024-06-14", seed=1)
    assert first.aliases == again.aliases and first.messages() == again.messages()
    task = first.task.model_copy(update={"task_id": "another"})
    other = Episode.start(task, sample_store)
    assert other.aliases.symbols != first.aliases.symbols  # type: ignore[union-attr]
    plain = Episode.start(task.model_copy(update={"anonymized": False}), sample_store)
    assert other.tool_schemas() == first.tool_schemas() == hide_schemas(plain.tool_schemas())  # one verl tool config


def test_hidden_schemas_name_each_index_once() -> None:
    [macro] = hide_schemas([TOOLS.all()["get_macro_indicators"].schema()])
    assert "index 可选 上证指数、沪深300指数、中证500指数，" in macro["function"]["description"]


def test_reveal_gives_back_the_real_symbols_and_dates(sample_store: MarketStore, tmp_path: Path) -> None:
    day = TradingDay(anonymized(sample_store, "2024-06-14", seed=1))
    symbol = day.episode.task.pool[0]
    alias = day.episode.aliases.symbols[symbol]  # type: ignore[union-attr]
    day.turn("", [("get_price_data", json.dumps({"symbol": alias}, ensure_ascii=False))])
    day.turn("", [("TakeAction", '{"type": "stop"}')])
    write_trajectories(tmp_path / "t.jsonl", [day.to_trajectory("test")])
    (stored,) = read_trajectories(tmp_path / "t.jsonl")
    text = next(m.content for m in stored.messages if m.role == "tool")
    assert stored.episode.aliases == day.episode.aliases and "T-1" in text and symbol not in text
    revealed = stored.episode.reveal(text)
    assert f"## {symbol} " in revealed and f"({sample_store.shift('2024-06-14', -1)})" not in text
    assert str(sample_store.shift("2024-06-14", -4)) in revealed and "T-" not in revealed


def test_a_plain_task_and_episode_serialise_as_before(sample_store: MarketStore) -> None:
    task = day_task(sample_store, "2024-06-14", pool_size=5, seed=1)
    keys = ["task_id", "date", "pool", "holdings", "cost_basis", "cash", "universe", "index"]
    assert list(json.loads(task.model_dump_json())) == keys and list(task.model_dump()) == keys
    episode = Episode.start(task, sample_store)
    assert "aliases" not in episode.model_dump() and episode.hide("SH600519 2024-06-14") == "SH600519 2024-06-14"
    assert episode.reveal("主板001 T-1") == "主板001 T-1"
    flagged = task.model_copy(update={"anonymized": True})
    assert Task.model_validate_json(flagged.model_dump_json()).anonymized


def test_a_stored_anonymized_episode_reads_the_same_after_bind(sample_store: MarketStore) -> None:
    episode = anonymized(sample_store, "2023-08-28", seed=2)
    loaded = Episode.model_validate_json(episode.model_dump_json()).bind(sample_store)
    alias = next(iter(episode.aliases.symbols.values()))  # type: ignore[union-attr]
    assert loaded.messages() == episode.messages()
    assert loaded.call("get_price_data", {"symbol": alias}) == episode.call("get_price_data", {"symbol": alias})


@pytest.mark.slow
def test_anonymized_texts_ignore_the_future(
    sample_store: MarketStore, sample_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:
    t0 = pd.Timestamp("2024-06-14")
    table, members = perturb_future(sample_table, read_instruments_file(sample_data / "csi300.txt"), t0, 5)
    out = write_dataset(
        table,
        tmp_path / "perturbed",
        meta=DatasetMeta(source="perturbed"),
        calendar=read_calendar_file(sample_data / "calendar.txt"),
        universes={"csi300": members},
    )
    perturbed = MarketStore.load(out)
    original, changed = anonymized(sample_store, "2024-06-14", seed=4), anonymized(perturbed, "2024-06-14", seed=4)
    assert changed.messages() == original.messages() and changed.tool_schemas() == original.tool_schemas()
    for name, arguments in every_call(original):
        assert changed.call(name, arguments) == original.call(name, arguments), (name, arguments)
    assert changed.model_dump() == original.model_dump()


def test_dates_off_the_calendar_stay_relative(sample_store: MarketStore) -> None:
    """A date that is not a trading day up to T0 (a rule change, a weekend) is a count of days, never a date."""
    episode = anonymized(sample_store, "2023-08-28")
    assert episode.hide("2023-08-27 20230901 2023年8月 2023-02-30") == "T0前1个自然日 T0后4个自然日 某年 某日"
    assert episode.aliases.reveal("T0前1个自然日") == "2023-08-27"  # type: ignore[union-attr]
    assert dt.date(2023, 8, 28) == episode.task.date


def test_call_and_play_take_anonymize(sample_dataset: Path, tmp_path: Path) -> None:
    base = ["--data", str(sample_dataset), "--date", "2024-06-14", "--pool", "SH600519,SZ000001", "--anonymize"]
    run = run_trade("tools", "call", "get_price_data", *base, "--args", '{"symbol": "SH600519"}')
    assert run.code == 1 and run.out.startswith(f"错误：{OTHER_SYMBOL} 不在股票池中；股票池共2只：主板")
    script = "help\nstate\nprompt\ntools\nstop\n"
    run = run_trade(
        "tools", "play", *base, "--holdings", "SZ000001=1000", "--save", str(tmp_path / "d.jsonl"), input=script
    )
    assert run.code == 0, run.err
    model_view = run.out.split("状态：stopped")[0]
    assert not leaks(model_view, MarketStore.load(sample_dataset)), leaks(model_view, MarketStore.load(sample_dataset))
    (stored,) = read_trajectories(tmp_path / "d.jsonl")
    assert stored.episode.task.anonymized and "SZ000001" in stored.episode.aliases.reveal(model_view)  # type: ignore[union-attr]
    units = re.search(r"：([\d,.]+)单位（可卖([\d,.]+)）", model_view)  # the prompt's holding, in units
    assert units and f"{units[1]}(可卖{units[2]})" in model_view.split("现金 ")[1] and " 1000(可卖" not in model_view
