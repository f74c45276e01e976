"""`--anonymize` in `trade eval backtest` and `trade eval tasks`: what reaches the server names no real stock and no
date, the orders trade the real stocks, and reports show the real names again."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import numpy as np
import pytest

from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_data.synth import write_synthetic_market
from trade_eval.policies.baselines import EqualWeight, Momentum
from trade_eval.policy import Policy, RunSettings
from trade_eval.testing import STOP, FaultServer, Reply, Request
from trade_records.runfolder import DAYS, EPISODES, MANIFEST, TRAJECTORIES
from trade_reward.forward import ground_truth
from trade_reward.outcome import outcome
from trade_reward.schemes import get_scheme
from trade_reward.taskbuilder import build_tasks
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.records import Task
from trade_tools.sampler import day_task
from trade_tools.trajectory import Trajectory

LEAK = re.compile(r"(?i)(?<![a-z0-9])(SH|SZ|BJ)\d{6}|(19|20)\d{2}[-/.]\d{1,2}[-/.]\d{1,2}|\b\d{2}-\d{2}\b")
"""A real code or a calendar date (MM-DD included) in any text the model reads."""
POOL = re.compile(r"股票池（\d+只）：(.+)")


def _alias_trader(request: Request) -> Reply:
    """Reads the first pool alias from the user message, then: every data tool on it, a one-lot buy, stop."""
    user = next(m["content"] for m in request.body["messages"] if m["role"] == "user")
    alias = POOL.search(user).group(1).split(", ")[0]
    if request.turn == 0:
        return Reply(
            calls=(
                ("get_price_data", json.dumps({"symbol": alias, "period": "10d", "indicators": ["MA", "RSI"]})),
                ("compute_alpha_factor", json.dumps({"symbol": alias, "factor": "ROC5"})),
                ("get_macro_indicators", "{}"),
            )
        )
    if request.turn == 1:
        order = {"type": "buy", "symbol": alias, "amount": 100, "reasoning": f"买入{alias}"}
        return Reply(calls=(("TakeAction", json.dumps(order, ensure_ascii=False)),))
    return STOP


def _no_leak(server: FaultServer) -> None:
    assert len(server.requests) >= 3
    for body in server.requests:
        text = json.dumps({"messages": body["messages"], "tools": body.get("tools")}, ensure_ascii=False)
        assert LEAK.search(text) is None, LEAK.search(text)


def _trajectories(out: Path) -> list[Trajectory]:
    return [Trajectory.model_validate_json(line) for line in (out / TRAJECTORIES).read_text().splitlines()]


def test_a_tasks_run_sends_no_real_code_or_date_and_trades_the_real_stock(sample_dataset: Path, tmp_path: Path) -> None:
    build_tasks(sample_dataset, tmp_path / "tasks", split="test=2025-07-01:2025-07-08", pool_size="6", seed=1)
    out = tmp_path / "anon"
    with FaultServer(_alias_trader) as server:
        done = run_trade(
            "eval",
            "tasks",
            "--tasks",
            str(tmp_path / "tasks"),
            "--split",
            "test",
            "--base-url",
            server.url,
            "--model",
            "m",
            "--anonymize",
            "--limit",
            "2",
            "--out",
            str(out),
        )
    assert done.code == 0, done.err
    _no_leak(server)
    assert json.loads((out / MANIFEST).read_text())["anonymized"] is True
    for trajectory in _trajectories(out):
        [buy] = [a for a in trajectory.episode.actions if a.type == "buy"]
        assert buy.fill is not None and buy.symbol in trajectory.episode.task.pool
        assert trajectory.episode.reveal(buy.reasoning) == f"买入{buy.symbol}"
    assert all(json.loads(line)["status"] == "done" for line in (out / EPISODES).read_text().splitlines())


def test_a_backtest_sends_no_real_code_or_date_and_its_report_shows_real_names(
    sample_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "anon"
    with FaultServer(_alias_trader) as server:
        done = run_trade(
            "eval",
            "backtest",
            "--base-url",
            server.url,
            "--model",
            "m",
            "--start-date",
            "2025-06-20",
            "--num-days",
            "2",
            "--pool-size",
            "5",
            "--data",
            str(sample_dataset),
            "--anonymize",
            "--out",
            str(out),
        )
    assert done.code == 0, done.err
    _no_leak(server)
    bought = {a.symbol for t in _trajectories(out) for a in t.episode.actions if a.type == "buy" and a.fill}
    assert bought and all(re.fullmatch(r"S[HZ]\d{6}", s) for s in bought)
    report = run_trade("eval", "report", str(out), "--out", str(out / "report.html"))
    assert report.code == 0, report.err
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Anonymized" in page and all(f"买入{symbol}" in page for symbol in bought)


@pytest.mark.real_data
@pytest.mark.parametrize("policy", ["momentum", "equal-weight"])
def test_an_anonymized_baseline_trades_exactly_as_the_plain_one(
    policy: str, sample_dataset: Path, tmp_path: Path
) -> None:
    """Baselines name stocks by what the episode shows, so hiding the names changes none of their orders."""
    navs = {}
    for name, flags in {"plain": [], "anon": ["--anonymize"]}.items():
        done = run_trade(
            "eval",
            "backtest",
            "--policy",
            policy,
            "--start-date",
            "2025-06-20",
            "--num-days",
            "5",
            "--data",
            str(sample_dataset),
            *flags,
            "--out",
            str(tmp_path / name),
        )
        assert done.code == 0, done.err
        navs[name] = [json.loads(line)["nav"] for line in (tmp_path / name / DAYS).read_text().splitlines()]
    assert navs["anon"] == navs["plain"] and len(set(navs["plain"])) > 1


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory: pytest.TempPathFactory) -> MarketStore:
    """A synthetic market of 40 stocks (10% STAR) over 2020's first half."""
    out = write_synthetic_market(tmp_path_factory.mktemp("synth") / "m", 40, "2020-01-01", "2020-06-30", seed=1)
    return MarketStore.load(out)


def _days(store: MarketStore, count: int = 20) -> list[int]:
    rng = np.random.default_rng(25)
    return sorted(int(t) for t in rng.choice(np.arange(30, len(store.dates) - 6), size=count, replace=False))


def _played(policy: Policy, task: Task, store: MarketStore) -> Episode:
    day = TradingDay.start(task, store)
    asyncio.run(policy.play(day, RunSettings()))
    return day.episode


def _orders(episode: Episode) -> list[tuple[str, str | None, bool, int | None]]:
    return [(a.type, a.symbol, a.accepted, a.fill and a.fill.shares) for a in episode.actions]


@pytest.mark.parametrize("policy", [EqualWeight(), Momentum()], ids=lambda p: p.name)
def test_a_baseline_places_the_same_real_orders_on_an_anonymized_day(policy: Policy, synth_store: MarketStore) -> None:
    """Baselines size orders in real shares and type the units they are worth (``Episode.units_for``), so hiding
    the scales changes no fill, cash, holding or reward; pools without STAR stocks (tested below), holdings
    drawn from the pool so there are sells too."""
    sold = 0
    for t in _days(synth_store):
        date = synth_store.dates[t].astype(object)
        drawn = day_task(synth_store, date, pool_size=12, seed=t, universe="all").pool
        pool = [s for s in drawn if board_of(s) is not Board.STAR]
        task = day_task(synth_store, date, pool=pool, seed=t, universe="all")
        plain, anonymized = (
            _played(policy, task.model_copy(update={"anonymized": a}), synth_store) for a in (False, True)
        )
        assert {a.accepted for a in anonymized.actions} == {True} and anonymized.status == "stopped"
        assert _orders(anonymized) == _orders(plain), date
        assert (anonymized.cash, anonymized.positions) == (plain.cash, plain.positions), date
        truth = ground_truth(synth_store, date, sorted({*task.pool, *task.holdings}))
        scores = [get_scheme("continuous").score(outcome(e, truth)) for e in (anonymized, plain)]
        assert scores[0] == scores[1], date
        sold += sum(a.type == "sell" for a in plain.actions)
    assert sold > 3


@pytest.mark.parametrize("policy", [EqualWeight(), Momentum()], ids=lambda p: p.name)
def test_an_anonymized_baselines_star_orders_are_the_nearest_counts_whole_units_name(
    policy: Policy, synth_store: MarketStore
) -> None:
    """A STAR order may be any count from 200 shares; a unit of several shares names only some, so the order is
    the largest count below the plain one that whole units trade, and none is refused. Where a unit is at most a
    share, or off STAR, the order is the plain one, up to the first cut (later buys have its change to spend)."""
    coarse = exact = 0
    for t in _days(synth_store):
        task = day_task(synth_store, synth_store.dates[t].astype(object), pool_size=12, seed=t, universe="all")
        plain, anonymized = (
            _played(policy, task.model_copy(update={"anonymized": a}), synth_store) for a in (False, True)
        )
        assert {a.accepted for a in anonymized.actions} == {True} and anonymized.status == "stopped"
        cut = False
        for (side, symbol, _, shares), (*order, planned) in zip(_orders(anonymized), _orders(plain), strict=True):
            assert [side, symbol] == order[:2]
            if cut or side == "stop":
                continue
            star = board_of(symbol) is Board.STAR
            if star and anonymized.price_scale(symbol) > 1:
                assert planned - anonymized.price_scale(symbol) < shares <= planned, (task.task_id, symbol)
                cut = shares < planned
                coarse += cut
            else:
                assert shares == planned, (task.task_id, symbol)
                exact += star
    assert coarse and exact


def test_a_refused_order_reads_in_real_shares_in_reports(synth_store: MarketStore) -> None:
    """Reports and the dashboard list a refused anonymized order under "Shares" as the real shares its typed
    units are worth (they once showed the units), with the units beside them; a plain order's shares as typed."""
    from trade_eval.report.page import orders_view

    task = day_task(synth_store, synth_store.dates[40].astype(object), pool_size=5, seed=3)
    for anonymized in (True, False):
        episode = Episode.start(task.model_copy(update={"anonymized": anonymized}), synth_store)
        symbol = task.pool[0]
        typed = episode.units_for(symbol, 100_000_000)  # worth more than the cash: refused
        shown = episode.aliases.symbols[symbol] if episode.aliases else symbol
        episode.call("TakeAction", {"type": "buy", "symbol": shown, "amount": typed})
        refused = orders_view(episode)["refused"]
        assert len(refused) == 1 and refused[0]["symbol"] == symbol, refused
        assert refused[0]["amount"] == episode.shares_for("buy", symbol, typed) == 100_000_000
        assert refused[0].get("units") == (typed if anonymized else None)
        assert anonymized is False or typed != 100_000_000
