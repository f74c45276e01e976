"""A backtest whose policy never traded, or whose every call failed, says so beside its return: in summary.json's
counts, the printed table, the report and the dashboard (real backtests on a small synthetic market)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from trade_data.store import MarketStore
from trade_data.synth import write_synthetic_market
from trade_eval.backtest import Backtest, new_manifest, run_backtest
from trade_eval.dashboard.app import make_app
from trade_eval.metrics import table_lines
from trade_eval.policies.baselines import Hold
from trade_eval.policy import DayUsage, Policy, PolicyUnavailable, RunSettings
from trade_eval.report.page import write_report
from trade_eval.report.runs import load_run
from trade_records.runfolder import BacktestSummary, read_summary
from trade_tools.day import TradingDay

DAYS = 6
NEVER = f"never traded (0 orders filled on {DAYS} days)"
FAILED = f"every call failed on {DAYS} of {DAYS} days"


def stop() -> tuple[str, str]:
    return "TakeAction", json.dumps({"type": "stop", "reasoning": "观望"})


class Idle(Policy):
    """Sits in cash: every day it only stops."""

    name = "idle"
    description = "stops every day"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        day.turn("", [stop()])
        return DayUsage(requests=1)


class Refused(Policy):
    """Orders every day, a stock outside the pool the Episode refuses, then stops."""

    name = "refused"
    description = "orders what the Episode refuses"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        order = {"type": "buy", "symbol": "SH999999", "amount": 100, "reasoning": "试探"}
        day.turn("", [("TakeAction", json.dumps(order)), stop()])
        return DayUsage(requests=1)


class Broken(Policy):
    """A model that gets nothing right: its server is down on even days; on the others it calls a tool that does
    not exist and writes arguments that are not JSON, and leaves the day open."""

    name = "broken"
    description = "every call fails"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        if day.episode.task.date.toordinal() % 2 == 0:
            raise PolicyUnavailable("HTTP 500 from the server after 3 retries", DayUsage(requests=4, retries=3))
        day.turn("", [("no_such_tool", "{}"), ("TakeAction", '{"type": "buy",')])
        return DayUsage(requests=1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``runs/<policy>``: a backtest of each policy over the same 6 days of a synthetic market."""
    market = write_synthetic_market(
        tmp_path_factory.mktemp("market") / "synth", symbols=40, start="2024-01-01", end="2024-06-30", seed=0
    )
    store = MarketStore.load(market)
    backtest = Backtest(store, dt.date(2024, 4, 1), DAYS, pool_size=10)
    root = tmp_path_factory.mktemp("runs")
    for policy in (Idle(), Refused(), Broken(), Hold()):
        settings = RunSettings(model=policy.name)
        manifest = new_manifest(
            backtest, policy.name, settings, command=["test"], data=market, pool_file=None, pool_size=10
        )
        run_backtest(backtest, policy, settings, root / policy.name, manifest, progress=False)
    return root


def summary(runs: Path, name: str) -> BacktestSummary:
    return read_summary(runs / name, "backtest")


def test_the_summary_counts_orders_filled_days_traded_and_days_every_call_failed(runs: Path) -> None:
    rows = summary(runs, "idle").rows
    assert rows["idle"]["trading"] == {"days": DAYS, "orders_filled": 0, "days_traded": 0, "days_every_call_failed": 0}
    hold = rows["hold"]["trading"]  # buys the pool on the first day, then never trades
    assert hold["days_traded"] == 1 and hold["orders_filled"] > 0 and hold["days_every_call_failed"] == 0
    assert "trading" not in rows["CSI300"]
    refused = summary(runs, "refused").rows["refused"]
    assert (refused["orders"], refused["refused"], refused["trading"]["orders_filled"]) == (DAYS, DAYS, 0)
    broken = summary(runs, "broken").rows["broken"]
    assert broken["trading"]["days_every_call_failed"] == DAYS and 0 < broken["failed_days"] < DAYS


@pytest.mark.parametrize(("name", "note"), [("idle", NEVER), ("refused", NEVER), ("broken", FAILED)])
def test_the_printed_table_notes_it_under_the_total_return(runs: Path, name: str, note: str) -> None:
    lines = table_lines(summary(runs, name))
    [total] = [i for i, line in enumerate(lines) if line.startswith("total return")]
    cells = re.split(r" {2,}", lines[total + 1])
    assert lines[0].split() == ["metric", name, "hold", "equal-weight", "momentum", "CSI300"]
    assert cells == ["note", note, "-", "-", "-", "-"]
    assert len(lines[total + 1]) == len(lines[total])  # a column of the table, as wide as the others


def test_a_table_of_rows_that_all_traded_has_no_note(runs: Path) -> None:
    found = summary(runs, "hold")
    assert all(row["trading"]["days_traded"] > 0 for name, row in found.rows.items() if name != "CSI300")
    assert not [line for line in table_lines(found) if line.startswith("note")]


def test_the_report_notes_it_under_the_total_return(runs: Path, tmp_path: Path) -> None:
    files = write_report([load_run(runs / "idle"), load_run(runs / "broken")], tmp_path / "report.html")
    html = files.html.read_text(encoding="utf-8")
    for name, note in (("idle", NEVER), ("broken", FAILED)):
        table = re.search(rf'<h3>{name}: its own days</h3>\s*<table class="grid metrics".*?</table>', html, re.S)
        assert table is not None
        rows = re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", table.group(0), re.S)
        labels = [label for label, _ in rows]
        assert labels[labels.index("total return") + 1] == "note"
        assert re.findall(r'<td class="n">(.*?)</td>', rows[labels.index("note")][1])[0] == note


def test_the_dashboard_notes_it_beside_the_return(runs: Path) -> None:
    async def pages() -> tuple[str, str]:
        reader = ThreadPoolExecutor(1)
        async with TestClient(TestServer(make_app(runs, None, reader=reader))) as client:
            await client.get("/")  # lists the runs: their reads start in the background
            await asyncio.wrap_future(reader.submit(lambda: None))  # the reader reads in order: they are done
            listing = await (await client.get("/")).text()
            page = await (await client.get("/run", params={"run": "idle"})).text()
        return listing, page

    listing, page = asyncio.run(pages())
    row = {name: re.search(rf'run={name}".*?</tr>', listing, re.S).group(0) for name in ("idle", "broken", "hold")}  # type: ignore[union-attr]
    assert re.search(rf"return</span> [+-]?\d+\.\d+% — {re.escape(NEVER)}", row["idle"])  # 0.00% has no sign
    assert f"— {FAILED}" in row["broken"]
    assert "never traded" not in row["hold"] and "every call failed" not in row["hold"]
    assert f'<td class="n">{NEVER}</td>' in page
