"""``trade eval report`` on real backtest runs (the engine, the real data): the page, its charts, damaged runs,
several runs side by side, and the page in a real headless Chromium."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from markupsafe import escape

from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_eval.backtest import Backtest, new_manifest, run_backtest
from trade_eval.policies.baselines import Hold, Momentum
from trade_eval.policy import DayUsage, Policy, PolicyUnavailable, RunSettings
from trade_eval.report.charts import Line, chart
from trade_eval.report.page import chart_lines, pct, write_report
from trade_eval.report.runs import load_run
from trade_tools.day import TradingDay

START = dt.date(2025, 6, 20)
HOSTILE = '<script>alert("reasoning")</script>'
FAILING_DAY = 2
"""The scripted policy's server is down on this day (0-based)."""


class Scripted(Policy):
    """A model stand-in that writes what a model may write: reasoning, text, a data call, an order the
    Episode refuses, markup meant for the page; on day FAILING_DAY its server is down."""

    name = "scripted"
    description = "scripted replies for the report's tests"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        episode = day.episode
        if episode.task.date == settings.options["failing"]:
            raise PolicyUnavailable("server error 500 after 3 retries", DayUsage(requests=4, retries=3))
        symbol = episode.task.pool[0]
        day.turn(
            f"<think>看看行情 {HOSTILE}</think>先查 <img src=x onerror=alert(1)>",
            [
                ("get_price_data", json.dumps({"symbol": symbol})),
            ],
        )
        day.turn(
            "下单",
            [
                ("TakeAction", json.dumps({"type": "buy", "symbol": symbol, "amount": 100, "reasoning": "试探"})),
                ("TakeAction", json.dumps({"type": "buy", "symbol": "SH999999", "amount": 100})),
                ("TakeAction", json.dumps({"type": "stop", "reasoning": "今日结束"})),
            ],
        )
        return DayUsage(requests=2, prompt_tokens=1200, completion_tokens=80)


def backtest_run(store: MarketStore, out: Path, policy: Policy, start: dt.date = START, days: int = 5) -> Path:
    """A real run folder: ``policy`` played by the engine over ``days`` days (pool of 10, seed 0)."""
    backtest = Backtest(store, start, days, pool_size=10)
    settings = RunSettings(model="scripted-model", options={"failing": backtest.dates[FAILING_DAY]})
    manifest = new_manifest(
        backtest, policy.name, settings, command=["test"], data=store.path, pool_file=None, pool_size=10
    )
    run_backtest(backtest, policy, settings, out, manifest, progress=False)
    return out


@pytest.fixture(scope="module")
def runs(sample_store: MarketStore, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders of the scripted policy, of ``hold`` (same days) and of ``momentum`` (two days later)."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "scripted": backtest_run(sample_store, root / "scripted", Scripted()),
        "hold": backtest_run(sample_store, root / "hold", Hold()),
        "momentum": backtest_run(sample_store, root / "momentum", Momentum(), start=dt.date(2025, 6, 24)),
    }


@pytest.fixture(scope="module")
def report(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the scripted run, written by the ``trade`` CLI."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    done = run_trade("eval", "report", str(runs["scripted"]), "--out", str(out))
    assert done.code == 0, done.err
    assert f"wrote {out} (1 run, " in done.out
    return out


@pytest.mark.real_data
def test_report_shows_nav_metrics_days_trades_and_conversations(report: Path, runs: dict[str, Path]) -> None:
    html = report.read_text(encoding="utf-8")
    summary = json.loads((runs["scripted"] / "summary.json").read_text())
    days = [json.loads(line) for line in (runs["scripted"] / "days.jsonl").read_text().splitlines()]
    assert re.search(r'<img id="nav-chart" src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', html)
    assert re.search(r'<img id="drawdown-chart" src="data:image/png;base64,', html)
    for name in ("scripted", "hold", "equal-weight", "momentum", "CSI300"):
        assert f">{name}</th>" in html
    assert "Sharpe (252 d/yr, rf 0.00%)" in html and "trading days per year: 252" in html
    assert "slippage" in html and escape(summary["conventions"]["start"]) in html
    total = summary["rows"]["scripted"]["total_return"]
    assert f"{total:+.2%}" in html
    for day in days:
        assert f'id="day-1-{day["date"]}"' in html and f"{day['nav']:,.2f}" in html
    # the accepted fill with its fees, the refused order with its reason, the failed day with its reason
    fill = days[0]
    assert fill["fees"] > 0 and f"{fill['costs'] - fill['fees']:,.2f}" in html  # the slippage cell
    assert "SH999999 不在股票池中" in html
    assert days[FAILING_DAY]["status"] == "failed" and "server error 500 after 3 retries" in html
    assert "Fills the policy made before it failed" not in html  # a failed day made no fill
    assert "failed · failed" not in html
    # the conversation: system, user, reasoning folded, tool calls with arguments, tool results
    for part in ('<div class="msg system">', '<div class="msg user">', '<details class="reasoning">'):
        assert part in html
    assert '<span class="fn">get_price_data</span>' in html and "近20个交易日行情" in html
    assert "{&#34;type&#34;: &#34;buy&#34;, &#34;symbol&#34;: &#34;SH999999&#34;" in html


def test_model_text_is_escaped(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert "<script" not in html.lower() and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;reasoning&#34;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_page_requests_nothing_and_its_charts_are_written_beside_it(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    links = re.findall(r'\b(?:src|href)="([^"]*)"', html)
    assert links and all(link.startswith(("data:image/png;base64,", "#")) for link in links)
    assert "@import" not in html and "url(" not in html
    for name in ("nav.png", "drawdown.png"):
        assert (report.parent / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(p.name for p in report.parent.iterdir()) == ["drawdown.png", "nav.png", "report.html"]


def test_damaged_and_unfinished_runs_show_what_is_there(runs: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(runs["scripted"], broken)
    (broken / "summary.json").unlink()  # a run still being written has none yet
    days = (broken / "days.jsonl").read_text().splitlines(keepends=True)
    (broken / "days.jsonl").write_text(days[0] + "{not json\n" + "".join(days[1:]) + '{"date": "2025-06-2')
    trajectories = (broken / "trajectories.jsonl").read_text().splitlines(keepends=True)
    (broken / "trajectories.jsonl").write_text('{"id": "x"}\n' + "".join(trajectories[1:]))
    out = tmp_path / "out" / "report.html"
    done = run_trade("eval", "report", str(broken), str(runs["hold"]), "--out", str(out))
    assert done.code == 0, done.err
    assert "Traceback" not in done.err
    assert "warning: broken: days.jsonl:2: not a DayRecord" in done.err
    html = out.read_text(encoding="utf-8")
    for problem in (
        "days.jsonl:2: not a DayRecord (value: Invalid JSON: key must be a string",
        "days.jsonl:7: unfinished last line",
        "trajectories.jsonl:1: not a Trajectory",
        "summary.json: missing (unfinished or killed run): showing 5 of 5 finished days",
    ):
        assert problem in html
    assert html.count("No trajectory recorded for this day") == 1  # day 1's line was replaced
    assert "No metrics: summary.json is missing" in html and html.count('class="grid metrics"') == 2
    assert "unfinished" in html and 'id="nav-chart"' in html


def test_a_summary_of_another_shape_is_a_problem_not_metrics(runs: dict[str, Path], tmp_path: Path) -> None:
    """summary.json is read as the backtest's summary: one of another shape (here a tasks run's) is named as a
    problem and the run shown from its days, where it was taken as a summary with no rows."""
    run = tmp_path / "run"
    shutil.copytree(runs["hold"], run)
    (run / "summary.json").write_text(json.dumps({"episodes": 5, "played": 5, "failed": 0}))
    loaded = load_run(run)
    assert loaded.summary is None and len(loaded.days) == 5
    assert loaded.problems == ["summary.json: not a backtest summary (conventions: Field required)"]
    write_report([loaded], tmp_path / "report.html")
    assert "not a backtest summary" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_load_run_never_raises_for_broken_files(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs["hold"], run)
    (run / "manifest.json").write_text("[1, 2]")
    (run / "summary.json").write_bytes(b"\xff\xfe{")
    (run / "days.jsonl").write_text('{"date": "2025-06-20"}\n\n')
    loaded = load_run(run)
    assert loaded.manifest == {} and loaded.summary is None and loaded.days == []
    assert len(loaded.trajectories) == 5
    assert loaded.problems[0] == "manifest.json: not a JSON object"
    assert loaded.problems[1].startswith("days.jsonl:1: not a DayRecord (tool_calls: Field required")
    assert loaded.problems[2].startswith("summary.json: unreadable (")
    write_report([loaded], tmp_path / "report.html")
    assert "manifest.json: not a JSON object" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_a_manifest_of_the_wrong_shape_is_a_problem_not_a_crash(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs["scripted"], run)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "policy": 7, "dates": 5, "initial_cash": "many"}))
    loaded = load_run(run)
    assert loaded.problems == ["manifest.json: not a backtest manifest (policy: Input should be a valid string)"]
    assert loaded.policy == "scripted"  # the summary's first row
    html = write_report([loaded], tmp_path / "report.html").html.read_text(encoding="utf-8")
    assert "not a backtest manifest" in html and '<th class="n policy">scripted</th>' in html


def test_a_missing_run_folder_or_an_unwritable_out_is_one_line(runs: dict[str, Path], tmp_path: Path) -> None:
    missing = run_trade("eval", "report", str(tmp_path / "nope"))
    assert missing.code == 2 and "does not exist" in missing.err and "Traceback" not in missing.err
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = run_trade("eval", "report", str(runs["hold"]), "--out", str(blocker / "report.html"))
    assert done.code == 2 and done.err.startswith(f"error: cannot write {blocker / 'report.html'}")
    assert len(done.err.strip().splitlines()) == 1


def test_the_report_goes_into_its_run_folder_and_replaces_nothing_without_force(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Written into the current folder, a second run's report replaced the first one's without a word."""
    run, cwd = tmp_path / "hold", tmp_path / "elsewhere"
    shutil.copytree(runs["hold"], run)
    cwd.mkdir()
    done = run_trade("eval", "report", str(run), cwd=cwd)
    assert done.code == 0, done.err
    assert {p.name for p in run.iterdir()} >= {"report.html", "nav.png", "drawdown.png"} and not any(cwd.iterdir())
    page = (run / "report.html").read_bytes()
    again = run_trade("eval", "report", str(run), str(runs["scripted"]), cwd=cwd)
    assert again.code == 2 and again.err.startswith(f"error: {run / 'report.html'} exists (an earlier report?)")
    assert "--force" in again.err and len(again.err.splitlines()) == 1 and (run / "report.html").read_bytes() == page
    (cwd / "nav.png").write_bytes(b"my chart")
    beside = run_trade("eval", "report", str(run), "--out", str(cwd / "new.html"))
    assert beside.code == 2 and f"{cwd / 'nav.png'} exists" in beside.err and not (cwd / "new.html").exists()
    assert run_trade("eval", "report", str(run), "--force").code == 0


def test_a_folder_with_nothing_to_report_is_an_error(runs: dict[str, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_trade("eval", "report", str(runs["hold"]), str(empty), "--out", str(tmp_path / "r.html"))
    assert done.code == 2 and done.err.startswith(f"error: {empty}: nothing to report (no finished day, no summary")
    assert len(done.err.splitlines()) == 1 and not (tmp_path / "r.html").exists() and not any(empty.iterdir())


def test_several_runs_side_by_side_on_their_common_days(runs: dict[str, Path], tmp_path: Path) -> None:
    loaded = [load_run(runs[name]) for name in ("scripted", "hold", "momentum")]
    lines, dates = chart_lines(loaded)
    # hold's and scripted's windows: 06-19 (base) .. 06-26; momentum's: 06-23 (base) .. 06-30
    assert dates == ["2025-06-23", "2025-06-24", "2025-06-25", "2025-06-26"]
    # each policy; the baselines once per pool (scripted's and hold's runs share theirs, and scripted's hold is
    # the hold run itself); the index once, though its NAVs are scaled from two different base closes
    assert [(line.label, line.kind) for line in lines] == [
        ("scripted (scripted)", "policy"),
        ("hold (hold)", "policy"),
        ("momentum (momentum)", "policy"),
        ("equal-weight (scripted, hold)", "baseline"),
        ("momentum (scripted, hold)", "baseline"),
        ("hold (momentum)", "baseline"),
        ("equal-weight (momentum)", "baseline"),
        ("CSI300", "index"),
    ]
    assert all(line.dates == dates and len(line.values) == 4 for line in lines)
    files = write_report(loaded, tmp_path / "report.html")
    html = files.html.read_text(encoding="utf-8")
    assert "All runs on their 3 common days" in html and 'id="metrics-common"' in html
    assert "start: each line from its NAV at the close of 2025-06-23" in html
    common = html[html.index('id="metrics-common"') : html.index('id="metrics-1"')]
    assert "intervals [lo, hi]: 95% percentile intervals, stationary bootstrap" in common
    assert re.search(r"[+-]\d+\.\d+% \[[+-]\d+\.\d+%,\s[+-]\d+\.\d+%\]", common)  # a total return with its interval
    for index, name in enumerate(("scripted", "hold", "momentum"), start=1):
        assert f'id="run-{index}"' in html and f"Days: {name}" in html
    out = tmp_path / "cli" / "report.html"
    folders = [str(runs[name]) for name in ("scripted", "hold", "momentum")]
    done = run_trade("eval", "report", *folders, "--out", str(out))
    assert done.code == 0 and "(3 runs compared on the 3 days they all have;" in done.out, done.out


def test_damaged_conventions_fall_back_to_the_defaults(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "hold"
    shutil.copytree(runs["hold"], run)
    summary = json.loads((run / "summary.json").read_text())
    summary["conventions"] = {"trading_days_per_year": "many", "risk_free": None, "convention": "other"}
    (run / "summary.json").write_text(json.dumps(summary))
    files = write_report([load_run(run), load_run(runs["momentum"])], tmp_path / "report.html")
    html = files.html.read_text(encoding="utf-8")
    assert "trading days per year: many" in html  # the run's own conventions, shown as written
    assert "annualised return (252 d/yr)" in html  # the common days' table under the defaults


@pytest.mark.slow
def test_report_of_a_60_day_run_takes_under_a_few_seconds(sample_store: MarketStore, tmp_path: Path) -> None:
    import time

    run = backtest_run(sample_store, tmp_path / "run", Momentum(), days=60)
    started = time.perf_counter()
    write_report([load_run(run)], tmp_path / "report.html")
    assert time.perf_counter() - started < 10  # about 0.5 s on an idle core


# -- in a real browser -------------------------------------------------------------------------------


def chromium() -> str | None:
    """Debian's chromium (or $TRADE_CHROMIUM)."""
    return os.environ.get("TRADE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def fits(page) -> None:  # type: ignore[no-untyped-def]
    """At the page's width nothing sticks out: no table reaches past the window, the CSI300 column included."""
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for table in page.locator("table.grid").all():
        assert table.evaluate("t => t.getBoundingClientRect().right") <= width
    for column in page.locator("table.metrics thead th", has_text="CSI300").all():
        assert column.is_visible() and column.evaluate("th => th.getBoundingClientRect().right") <= width


@pytest.mark.slow
def test_the_report_in_headless_chromium(report: Path, runs: dict[str, Path], tmp_path: Path) -> None:
    """At 1,400 px: the page, its metrics (the several runs' table has eight columns), a day and its
    conversation."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the system browser is used)")
    browser_path = chromium()
    if browser_path is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    requests: list[str] = []
    dialogs: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("request", lambda request: requests.append(request.url))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(report.as_uri())
        page.screenshot(path=tmp_path / "top.png")
        chart = page.locator("#nav-chart")
        assert chart.is_visible() and chart.evaluate("img => img.naturalWidth") > 500
        metrics = page.locator("#metrics-1")
        names = metrics.locator("thead th").all_inner_texts()[1:]
        assert names == ["scripted", "hold", "equal-weight", "momentum", "CSI300"]
        first = metrics.locator("tbody tr").first.inner_text()
        assert first.startswith("total return") and re.search(r"[+-]\d+\.\d\d% \[[+-]\d+\.\d\d%,\s[+-]", first)
        assert page.get_by_text("intervals [lo, hi]: 95% percentile intervals").first.is_visible()
        metrics.screenshot(path=tmp_path / "metrics.png")
        fits(page)
        cells = page.locator("#runs tbody tr").first.locator("td").all_inner_texts()
        first_run = dict(zip(page.locator("#runs thead th").all_inner_texts(), cells, strict=True))
        said = {row.split("\t")[0]: row.split("\t")[1] for row in metrics.locator("tbody tr").all_inner_texts()}
        for column, label in (("Failed days", "failed days"), ("Not ended by stop", "days not ended by stop")):
            assert first_run[column] == said[label], column  # the runs table and the metrics count alike
        day = page.locator("details.day").first
        conversation = day.locator("details.conversation")
        assert not conversation.is_visible()
        day.locator("summary").first.click()
        conversation.locator("summary").first.click()
        call = conversation.locator(".call .fn", has_text="get_price_data")
        assert call.is_visible()
        conversation.locator("details.reasoning summary").first.click()
        assert HOSTILE in conversation.locator("details.reasoning pre").first.inner_text()
        assert "SH999999 不在股票池中" in day.locator("table.refused").inner_text()
        day.screenshot(path=tmp_path / "day.png")
        compared = [load_run(runs[name]) for name in ("scripted", "hold", "momentum")]
        page.goto(write_report(compared, tmp_path / "compared" / "report.html").html.as_uri())
        assert len(page.locator("#metrics-common thead th").all()) == 9  # labels, 3 policies, 4 baselines, CSI300
        fits(page)
        page.locator("#metrics-common").screenshot(path=tmp_path / "compared.png")
        browser.close()
    assert dialogs == []  # no model text ran as a script
    assert requests and all(url.startswith(("file://", "data:")) for url in requests)
    shots = ("top.png", "metrics.png", "day.png", "compared.png")
    assert all((tmp_path / name).stat().st_size > 10_000 for name in shots)


def test_every_interval_stands_beside_its_value_with_the_method_below(report: Path, runs: dict[str, Path]) -> None:
    html = report.read_text(encoding="utf-8")
    summary = json.loads((runs["scripted"] / "summary.json").read_text())
    row = summary["rows"]["scripted"]
    for key in ("total_return", "mean", "excess_return_vs_index"):
        (lo, hi), value = row[f"{key}_ci"], row[key]
        assert f"{pct(value)} [{pct(lo)},\u00a0{pct(hi)}]" in html, key  # the interval holds together
    lo, hi = row["sharpe_ci"]
    assert f"{row['sharpe']:,.2f} [{lo:,.2f},\u00a0{hi:,.2f}]" in html
    assert f"<li>intervals [lo, hi]: {summary['conventions']['ci']}</li>" in html


def test_a_run_without_intervals_still_renders(runs: dict[str, Path], tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(runs["hold"], old)
    summary = json.loads((old / "summary.json").read_text())
    summary["conventions"].pop("ci")
    rows = summary["rows"].items()
    summary["rows"] = {name: {k: v for k, v in row.items() if not k.endswith("_ci")} for name, row in rows}
    (old / "summary.json").write_text(json.dumps(summary))
    html = write_report([load_run(old)], tmp_path / "report.html").html.read_text(encoding="utf-8")
    assert f"{summary['rows']['hold']['total_return']:+.2%}</td>" in html and "intervals [lo, hi]" not in html


@pytest.mark.parametrize("days", [1, 3, 20, 60])
def test_the_charts_tick_whole_days_however_short_the_run(days: int) -> None:
    """On a few days the automatic locator went down to hours: "12:00" ticks between daily closes."""
    dates = [str(day.date()) for day in pd.bdate_range("2025-06-19", periods=days + 1)]
    lines = [
        Line("p", dates, [1e6 * (1 + 0.01 * k) for k in range(len(dates))]),
        Line("CSI300", dates, [1.0] * len(dates)),
    ]
    for kind in ("nav", "drawdown"):
        labels = [tick.get_text() for tick in chart(lines, kind).axes[0].get_xticklabels()]
        assert len(labels) >= 2 and not any(":" in label for label in labels), labels
