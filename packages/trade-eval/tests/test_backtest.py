"""The backtest engine and its run folder on the real data: every day accounted for, resume, the index row."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_eval.backtest import Backtest, new_manifest, run_backtest
from trade_eval.policies.baselines import EqualWeight, Hold, Random
from trade_eval.policy import DayUsage, PolicyUnavailable, RunSettings
from trade_eval.run import LEFT_OPEN
from trade_records.runfolder import DAYS, MANIFEST, SUMMARY, TRAJECTORIES, BacktestSummary, DayRecord
from trade_tools.day import TradingDay
from trade_tools.rules import ExecutionRules


class Flaky(EqualWeight):
    """Equal weight, except that by the date it cannot reach its server, returns with the day open or raises."""

    name = "flaky"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        trouble = day.episode.task.date.toordinal() % 4
        if trouble == 0:
            order = {"type": "buy", "symbol": day.episode.task.pool[0], "amount": 100}
            day.turn("", [("TakeAction", json.dumps(order))])
            raise PolicyUnavailable("HTTP 500 from the server after 3 retries", DayUsage(requests=4, retries=3))
        if trouble == 1:
            return DayUsage(requests=1)
        if trouble == 2:
            raise ZeroDivisionError("a bug in the policy")
        return await super().play(day, settings)


def run(backtest: Backtest, policy, out: Path, resume: bool = False, **settings: object) -> BacktestSummary:  # type: ignore[no-untyped-def]
    manifest = new_manifest(
        backtest,
        policy.name,
        RunSettings(**settings),
        command=["test"],
        data=backtest.store.path,
        pool_file=None,
        pool_size=20,
    )
    return run_backtest(backtest, policy, RunSettings(**settings), out, manifest, resume=resume, progress=False)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_planned_day_is_recorded_when_the_policy_fails(
    backtest, sample_store: MarketStore, tmp_path: Path
) -> None:
    plan = backtest(16)
    summary = run(plan, Flaky(), tmp_path)
    days = [DayRecord.model_validate(d) for d in lines(tmp_path / DAYS)]
    trajectories = lines(tmp_path / TRAJECTORIES)
    assert [d.date for d in days] == plan.dates and [d.index for d in days] == list(range(16))
    assert [t["id"] for t in trajectories] == [d.trajectory_id for d in days]
    kinds = {d.date.toordinal() % 4 for d in days}
    assert kinds == {0, 1, 2, 3}
    for before, day, trajectory in zip([None, *days], days, trajectories, strict=False):
        trouble = day.date.toordinal() % 4
        morning = before.holdings if before else {}
        view = sample_store.asof(day.date)
        held_value = sum(n * view.last_close(s) for s, n in morning.items())
        if trouble in (0, 2):  # the policy could not play: the morning's portfolio is held
            assert (day.status, day.episode_status) == ("failed", "failed")
            assert day.holdings == morning and day.fees == day.turnover == 0
            assert day.nav == pytest.approx(day.value_before) == pytest.approx(day.cash + held_value)
            assert trajectory["episode"]["status_reason"] == day.reason
        if trouble == 0:
            assert day.reason == "HTTP 500 from the server after 3 retries" and (day.requests, day.retries) == (4, 3)
            assert trajectory["episode"]["actions"][0]["accepted"]  # kept in the record, not applied
        if trouble == 2:
            assert day.reason == "policy flaky raised ZeroDivisionError: a bug in the policy"
        if trouble == 1:
            assert (day.status, day.episode_status, day.reason) == ("done", "failed", LEFT_OPEN)
        if trouble == 3:
            assert (day.status, day.episode_status) == ("done", "stopped") and day.orders
    row = summary.rows["flaky"]
    failed = [d for d in days if d.status == "failed"]
    assert row["failed_days"] == len(failed) and sum(row["failure_reasons"].values()) == len(failed)
    assert set(summary.rows) == {"flaky", "hold", "equal-weight", "momentum", "CSI300"}


@pytest.mark.real_data
def test_the_csi300_row_reads_plus_18_3_percent_over_the_tutorial_window(backtest, tmp_path: Path) -> None:
    summary = run(backtest(60), Hold(), tmp_path)
    nav = summary.nav
    assert (nav["dates"][0], nav["dates"][1], nav["dates"][-1]) == ("2025-06-19", "2025-06-20", "2025-09-11")
    assert nav["CSI300"][-1] / nav["CSI300"][0] == pytest.approx(4548.03 / 3843.09, abs=2e-6)
    assert f"{summary.rows['CSI300']['total_return']:+.1%}" == "+18.3%"
    assert list(summary.rows) == ["hold", "equal-weight", "momentum", "CSI300"]
    assert summary.conventions["trading_days_per_year"] == 252
    assert "close of 2025-06-19" in summary.conventions["start"]


def test_the_manifest_records_the_run(backtest, tmp_path: Path) -> None:
    plan = backtest(3, pool_size=8, seed=5)
    run(plan, Random(), tmp_path, seed=5, temperature=0.3)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert set(manifest) >= {
        "format",
        "kind",
        "command",
        "policy",
        "model",
        "base_url",
        "sampling",
        "start_date",
        "num_days",
        "dates",
        "initial_cash",
        "pool",
        "max_turns",
        "rules",
        "data",
        "versions",
        "created_at",
    }
    assert (manifest["kind"], manifest["policy"], manifest["num_days"]) == ("backtest", "random", 3)
    assert manifest["sampling"] == {"temperature": 0.3, "top_p": None, "max_tokens": None, "seed": 5}
    assert manifest["pool"]["symbols"] == plan.pool and len(plan.pool) == 8
    assert len(manifest["data"]["fingerprint"]) == 16 and "trade-eval" in manifest["versions"]
    assert (tmp_path / SUMMARY).is_file()


def test_resume_continues_after_the_last_record_and_drops_what_a_kill_left(backtest, tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    run(backtest(10), Random(), whole, seed=1)
    days, trajectories = (whole / DAYS).read_text().splitlines(), (whole / TRAJECTORIES).read_text().splitlines()
    cut.mkdir()
    (cut / MANIFEST).write_text((whole / MANIFEST).read_text())
    (cut / DAYS).write_text("\n".join(days[:6]) + "\n" + days[6][:40])  # killed while writing day 7's record
    (cut / TRAJECTORIES).write_text("\n".join(trajectories[:8]) + "\n" + trajectories[8][:99])  # and 8, 9 orphans
    summary = run(backtest(10), Random(), cut, resume=True, seed=1)
    resumed = lines(cut / DAYS)
    assert [d["nav"] for d in resumed] == [json.loads(d)["nav"] for d in days]
    assert [t["id"] for t in lines(cut / TRAJECTORIES)] == [d["trajectory_id"] for d in resumed]
    assert [d["trajectory_id"] for d in resumed[:6]] == [json.loads(d)["trajectory_id"] for d in days[:6]]
    assert summary.nav["random"] == json.loads((whole / SUMMARY).read_text())["nav"]["random"]


def test_resume_refuses_other_settings_and_a_second_start_refuses_the_folder(backtest, tmp_path: Path) -> None:
    run(backtest(3), Hold(), tmp_path)
    with pytest.raises(TradeError, match="already holds a run"):
        run(backtest(3), Hold(), tmp_path)
    with pytest.raises(TradeError, match=r"other settings \(num_days, dates differ\)"):
        run(backtest(4), Hold(), tmp_path, resume=True)
    with pytest.raises(TradeError, match=r"other settings \(policy differ\)"):
        run(backtest(3), EqualWeight(), tmp_path, resume=True)
    with pytest.raises(TradeError, match="nothing to resume"):
        run(backtest(3), Hold(), tmp_path / "new", resume=True)


def test_dividends_are_settled_in_cash_at_the_ex_date_close(backtest, sample_store: MarketStore) -> None:
    records = backtest(60).simulate(Hold(), RunSettings())
    paid = [r for r in records if r.dividends]
    assert paid and all(r.holdings == records[0].holdings for r in records)
    for record in paid:
        before = records[records.index(record) - 1]
        assert record.value_before == pytest.approx(record.nav) and record.cash == pytest.approx(
            before.cash + record.dividends
        )


def test_the_cost_basis_moves_to_the_ex_dates_price_basis(backtest, sample_store: MarketStore) -> None:
    """A cost carried raw over an ex-date sits above the day's prices by the dividend (paid in cash already): the
    prompt read it as a loss beside get_price_data's forward-adjusted closes. Divided by the factor's ratio, it is
    on the day's basis; other days keep it."""
    records = backtest(60).simulate(Hold(), RunSettings())
    paid = 0
    for before, record in itertools.pairwise(records):
        for symbol, cost in before.cost.items():
            ratio = sample_store.asof(record.date).factor(symbol) / sample_store.asof(before.date).factor(symbol)
            paid += ratio > 1
            assert record.cost[symbol] == pytest.approx(cost / max(ratio, 1.0), rel=1e-12), (record.date, symbol)
    assert paid  # the window has ex-dates of held stocks


def test_the_pool_keeps_members_that_trade_and_held_stocks_stay_tradable(sample_store: MarketStore) -> None:
    traded, start = sample_store.traded, sample_store.day_index("2024-01-02")
    stocks = np.array([not s.startswith("SH000") for s in sample_store.symbols])
    t, j = np.argwhere(traded[start - 1 : -1] & ~traded[start:] & stocks)[0]  # a stock suspended after a trading day
    symbol, day = sample_store.symbols[j], sample_store.calendar[start + t].date()
    plan = Backtest(sample_store, sample_store.shift(day, -1), 2, pool=[symbol, "SH600519"])
    assert plan.day_pool(0) == sorted({symbol, "SH600519"}) and plan.day_pool(1) == ["SH600519"]
    assert np.isfinite(plan.simulate(EqualWeight(), RunSettings())[-1].nav)


def test_a_start_on_a_holiday_plays_from_the_next_trading_day(backtest) -> None:
    plan = backtest(2, start=dt.date(2025, 6, 21))  # a Saturday
    assert plan.dates == [dt.date(2025, 6, 23), dt.date(2025, 6, 24)] and plan.base_date == dt.date(2025, 6, 20)


@pytest.mark.real_data
def test_a_falling_adjustment_factor_settles_nothing(sample_store: MarketStore) -> None:
    """SH600372's factor falls 0.4% on 2020-11-19 (a data correction, not a corporate action): a fully invested
    portfolio must not be charged for it, let alone go below zero cash."""
    day = dt.date(2020, 11, 19)
    assert sample_store.asof(day).factor("SH600372") < sample_store.asof(sample_store.shift(day, -1)).factor("SH600372")
    plan = Backtest(
        sample_store, sample_store.shift(day, -1), 2, pool=["SH600372"], rules=ExecutionRules(max_position_weight=None)
    )
    first, second = plan.simulate(EqualWeight(), RunSettings())
    assert first.cash < 0.004 * first.nav  # fully invested
    assert second.dividends == 0 and second.status == "done"
