"""``trade eval dashboard`` over real run folders (backtests and a tasks run played by the engine on the real
data, training records in the trainers' layout), served by the real aiohttp server on 127.0.0.1 and read over
HTTP; the pages in a real headless Chromium (Debian's) at the end."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from aiohttp import web
from markupsafe import escape

from trade_data.store import MarketStore
from trade_eval.backtest import Backtest, new_manifest, run_backtest
from trade_eval.dashboard.app import LOOPBACK_HOSTS, allowed_hosts, make_app
from trade_eval.dashboard.lines import LineIndex
from trade_eval.policies.baselines import Hold
from trade_eval.policy import DayUsage, Policy, PolicyUnavailable, RunSettings
from trade_eval.single_day import TasksEval, load_tasks, run_tasks
from trade_eval.single_day import new_manifest as tasks_manifest
from trade_reward.schemes import get_scheme
from trade_reward.taskbuilder import build_tasks
from trade_tools.day import TradingDay

START = dt.date(2025, 6, 20)
HOSTILE = '<script>alert("reasoning")</script>'
FAILING_DAY = 2


class Scripted(Policy):
    """What a model may write: reasoning, a data call, a call of a tool that does not exist, an order the
    Episode fills and one it refuses, markup meant for the page; its server is down on ``options["failing"]``."""

    name = "scripted"
    description = "scripted replies for the dashboard's tests"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        episode = day.episode
        if episode.task.date == settings.options.get("failing"):
            raise PolicyUnavailable("server error 500 after 3 retries", DayUsage(requests=4, retries=3))
        symbol = episode.task.pool[0]
        day.turn(
            f"<think>看看行情 {HOSTILE}</think>先查",
            [
                ("get_price_data", json.dumps({"symbol": symbol})),
                ("no_such_tool", "{}"),
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


def backtest_run(store: MarketStore, out: Path, policy: Policy, days: int = 5) -> Path:
    backtest = Backtest(store, START, days, pool_size=10)
    settings = RunSettings(model="scripted-model", options={"failing": backtest.dates[FAILING_DAY]})
    manifest = new_manifest(
        backtest, policy.name, settings, command=["test"], data=store.path, pool_file=None, pool_size=10
    )
    run_backtest(backtest, policy, settings, out, manifest, progress=False)
    return out


def tasks_run(store: MarketStore, tasks: Path, out: Path) -> Path:
    records, split, _ = load_tasks(tasks, "test")
    evaluation = TasksEval(store, records, [get_scheme("bucketed"), get_scheme("continuous")], 1)
    settings = RunSettings(model="scripted-model")
    manifest = tasks_manifest(
        evaluation, "scripted", settings, command=[], tasks=tasks, split=split, servers=(), data=store.path
    )
    run_tasks(evaluation, Scripted(), settings, out, manifest, servers=(), concurrency=4, progress=False)
    return out


def training_run(tasks_run_dir: Path, out: Path) -> Path:
    """A training run in trl-grpo's layout: ``metrics.jsonl`` and ``rollouts/trajectories/{step}.jsonl`` (the
    step records are real scored trajectories, those of the tasks run)."""
    lines = (tasks_run_dir / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    folder = out / "rollouts" / "trajectories"
    folder.mkdir(parents=True)
    for step in (1, 2):
        chosen = [json.loads(line) for line in lines[(step - 1) * 3 : step * 3]]
        text = "".join(json.dumps({**t, "source": "trl-grpo", "step": step}, ensure_ascii=False) + "\n" for t in chosen)
        (folder / f"{step}.jsonl").write_text(text, encoding="utf-8")
        metrics = {
            "step": step,
            "trade/trajectories": 3.0,
            "trade/reward/score/mean": 0.1 * step,
            "trade/stop_rate": 1.0,
            "trade/tool_error_rate": 0.25,
            "trade/zero_variance_groups": 0.5,
        }
        with open(out / "metrics.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(metrics) + "\n")
    return out


@pytest.fixture(scope="module")
def root(sample_store: MarketStore, sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``runs/`` with a scripted backtest, hold on the same days, a scripted tasks run and a training run."""
    runs = tmp_path_factory.mktemp("dash") / "runs"
    backtest_run(sample_store, runs / "scripted", Scripted())
    backtest_run(sample_store, runs / "hold", Hold())
    tasks = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(sample_dataset, tasks, split="test=2025-07-01:2025-07-08", pool_size="8", per_day=2, seed=3)
    tasks_run(sample_store, tasks, runs / "tasks-scripted")
    training_run(runs / "tasks-scripted", runs / "train" / "grpo")
    return runs


class Served:
    """The dashboard's app on a real socket on 127.0.0.1, in a thread with its own event loop."""

    def __init__(
        self,
        root: Path,
        data: Path | None = None,
        hosts: frozenset[str] = LOOPBACK_HOSTS,
        reader: ThreadPoolExecutor | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.reader = reader or ThreadPoolExecutor(1)
        self.runner = web.AppRunner(make_app(root, data, hosts, self.reader))
        ready = threading.Event()

        async def start() -> None:
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()

        self.thread = threading.Thread(target=lambda: (self.loop.run_until_complete(start()), self.loop.run_forever()))
        self.thread.start()
        assert ready.wait(20)
        self.url = f"http://127.0.0.1:{self.port}"

    def get(self, path: str, *, read: bool = True) -> tuple[int, str]:
        """The status and page; with ``read``, the page once the runs it needs were read (a run's first
        request starts its read in the background and says so)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as response:
                answer = response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            answer = error.code, error.read().decode("utf-8", "replace")
        if read and ('id="reading"' in answer[1] or "reading…" in answer[1]):
            self.read()
            return self.get(path)
        return answer

    def read(self) -> None:
        """Wait until the reads started so far are done (the reader runs them in order, one at a time)."""
        self.reader.submit(lambda: None).result(60)

    def raw(self, target: str, head: str = "Host: 127.0.0.1", method: str = "GET", body: bytes = b"") -> int:
        """The status for a request sent as written (no client normalises ``..`` or ``%2e``, or sets the Host)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            lines = [f"{method} {target} HTTP/1.1", *filter(None, head.split("\n")), "Connection: close"]
            if body:
                lines += ["Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(body)}"]
            sock.sendall("\r\n".join([*lines, "", ""]).encode() + body)
            answer = sock.recv(200).decode("latin-1")
        return int(answer.split()[1])

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(20)


@pytest.fixture(scope="module")
def server(root: Path, sample_dataset: Path) -> Iterator[Served]:
    served = Served(root, sample_dataset)
    yield served
    served.close()


def q(run: str, **more: object) -> str:
    return urllib.parse.urlencode({"run": run, **more})


def test_the_run_list_shows_every_kind_with_headline_numbers(server: Served) -> None:
    status, html = server.get("/")
    assert status == 200
    for name in ("scripted", "hold", "tasks-scripted", "train/grpo"):
        assert f'href="/run?run={name}"' in html
    row = re.search(r'run=scripted".*?</tr>', html, re.S).group(0)  # type: ignore[union-attr]
    assert "5 / 5 days" in row and "CSI300" in row and "failed days</span> 1" in row
    assert "reward bucketed" in html and "2 steps" in html


def test_a_backtest_shows_nav_metrics_and_days(server: Served) -> None:
    status, html = server.get("/run?" + q("scripted"))
    assert status == 200 and 'id="nav-chart"' in html and 'id="metrics"' in html
    assert html.count("/day?run=scripted&amp;n=") == 5
    assert "server error 500 after 3 retries" in html
    chart = urllib.request.urlopen(server.url + "/nav.png?" + q("scripted"), timeout=30).read()
    assert chart.startswith(b"\x89PNG") and len(chart) > 10_000


def test_a_day_shows_its_conversation_orders_portfolio_and_escapes_model_text(server: Served, root: Path) -> None:
    status, html = server.get("/day?" + q("scripted", n=0))
    assert status == 200
    assert str(escape(HOSTILE)) in html and HOSTILE not in html
    assert "get_price_data" in html and "no_such_tool" in html  # the calls as the model wrote them
    assert "SH999999 不在股票池中" in html  # a refused order with the Episode's reason
    assert 'id="fills"' in html and "试探" in html  # the filled order with its reasoning
    assert "Portfolio before (the morning)" in html and "Portfolio after (the close)" in html
    assert "今日结束" in html
    day = json.loads((root / "scripted" / "days.jsonl").read_text().splitlines()[0])
    assert f"{day['nav']:,.2f}" in html


def test_a_failed_day_and_a_missing_day_say_why(server: Served) -> None:
    status, html = server.get("/day?" + q("scripted", n=FAILING_DAY))
    assert status == 200 and "server error 500 after 3 retries" in html
    status, html = server.get("/day?" + q("scripted", n=99))
    assert status == 404 and 'id="problem"' in html and "no line 100" in html
    status, html = server.get("/day?" + q("scripted", n=-1))
    assert status == 404


def test_filters_losing_failed_tool_errors_reason_and_symbol(server: Served, root: Path) -> None:
    days = [json.loads(line) for line in (root / "scripted" / "days.jsonl").read_text().splitlines()]
    links = lambda html: re.findall(r"/day\?run=scripted&amp;n=(\d+)", html)  # noqa: E731
    _, html = server.get("/run?" + q("scripted", show="failed"))
    assert links(html) == [str(FAILING_DAY)]
    _, html = server.get("/run?" + q("scripted", reason="server error 500 after 3 retries"))
    assert links(html) == [str(FAILING_DAY)]
    _, html = server.get("/run?" + q("scripted", show="errors"))
    assert links(html) == [str(i) for i, d in enumerate(days) if d["tool_errors"]] and len(links(html)) == 4
    navs = [1_000_000.0] + [d["nav"] for d in days]
    _, html = server.get("/run?" + q("scripted", show="losing"))
    assert links(html) == [str(i) for i in range(5) if navs[i + 1] < navs[i]]
    held = next(iter(days[-1]["holdings"]))
    _, html = server.get("/run?" + q("scripted", symbol=held.lower()))
    assert links(html) and set(links(html)) <= {str(i) for i in range(5)}
    _, html = server.get("/run?" + q("scripted", symbol="SZ000000"))
    assert links(html) == []


def test_two_runs_side_by_side_on_the_same_days(server: Served) -> None:
    status, html = server.get("/compare?" + q("scripted", other="hold"))
    assert status == 200 and "5 in common" in html
    assert html.count("/day?run=scripted&amp;n=") == 5 and html.count("/day?run=hold&amp;n=") == 5


def test_a_tasks_run_lists_episodes_with_rewards_and_failures_by_reason(server: Served, root: Path) -> None:
    status, html = server.get("/run?" + q("tasks-scripted"))
    assert status == 200 and "bucketed" in html and "continuous" in html
    episodes = len((root / "tasks-scripted" / "episodes.jsonl").read_text().splitlines())
    assert html.count("/day?run=tasks-scripted&amp;n=") == episodes
    status, html = server.get("/day?" + q("tasks-scripted", n=0))
    assert status == 200 and 'id="rewards"' in html and 'id="reward"' in html and "get_price_data" in html


def test_training_steps_with_a_click_to_their_trajectories(server: Served) -> None:
    status, html = server.get("/run?" + q("train/grpo"))
    assert status == 200 and 'id="steps"' in html
    assert "+0.2000" in html or "0.2000" in html  # step 2's mean reward
    assert "25.00%" in html and "50.00%" in html  # tool-error rate, zero-variance share
    status, html = server.get("/step?" + q("train/grpo", step=2))
    assert status == 200 and html.count("/day?run=train/grpo&amp;step=2&amp;n=") == 3
    status, html = server.get("/day?" + q("train/grpo", step=2, n=2))
    assert status == 200 and "step 2" in html and "get_price_data" in html
    for missing in (q("train/grpo", step=2, n=999), q("train/grpo", step=99, n=0)):
        status, html = server.get("/day?" + missing)
        assert status == 404 and 'id="problem"' in html


class Idle(Policy):
    """Returns without a call: each day is played but left without stop (the Episode records it as failed)."""

    name = "idle"
    description = "returns at once"

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        return DayUsage(requests=1)


def test_states_and_rates_read_as_what_they_are(root: Path, sample_store: MarketStore, tmp_path: Path) -> None:
    """A day played and left open read "done · failed", a share of stopped episodes "stop rate +100.00%", and a
    run's "failed" counted its unstopped days as failed ones."""
    runs = tmp_path / "runs"
    shutil.copytree(root / "tasks-scripted", runs / "tasks-scripted")
    backtest_run(sample_store, runs / "idle", Idle(), days=3)
    served = Served(runs)
    try:
        _, listing = served.get("/")
        idle = re.search(r'run=idle".*?</tr>', listing, re.S).group(0)  # type: ignore[union-attr]
        assert "failed days</span> 0" in idle and "not ended by stop</span> 3" in idle
        tasks = re.search(r'run=tasks-scripted".*?</tr>', listing, re.S).group(0)  # type: ignore[union-attr]
        assert "stop rate</span> 100.00%" in tasks
        for page in ("/run?" + q("idle"), "/day?" + q("idle", n=0), "/run?" + q("tasks-scripted")):
            status, html = served.get(page)
            assert status == 200 and " · failed" not in html and " · stopped" not in html, page
        assert "<td>not stopped</td>" in served.get("/run?" + q("idle"))[1]
        assert "<td>done</td>" in served.get("/run?" + q("tasks-scripted"))[1]
    finally:
        served.close()


def test_a_training_run_without_metrics_lines_gets_them_from_its_records(root: Path, tmp_path: Path) -> None:
    """verl logs its metrics elsewhere: the step's numbers come from its trajectory records."""
    shutil.copytree(root / "train" / "grpo" / "rollouts", tmp_path / "runs" / "verl" / "rollouts")
    records = [
        json.loads(line)
        for line in (tmp_path / "runs" / "verl" / "rollouts" / "trajectories" / "1.jsonl").read_text().splitlines()
    ]
    served = Served(tmp_path / "runs")
    try:
        status, html = served.get("/run?" + q("verl"))
    finally:
        served.close()
    assert status == 200 and "(records)" in html
    mean = sum(r["reward"]["score"] for r in records) / len(records)
    calls = sum(r["episode"]["tool_calls"] for r in records)
    errors = sum(r["episode"]["tool_errors"] for r in records)
    row = re.search(r'step=1">1</a>.*?</tr>', html, re.S).group(0)  # type: ignore[union-attr]
    assert f"{mean:,.4f}" in row and f"{errors / calls:.2%}" in row and "100.00%" in row


def test_nothing_outside_runs_is_served(root: Path, tmp_path: Path) -> None:
    """Names the listing did not give are 404, however they are spelled; links out of --runs are not followed."""
    outside = tmp_path / "secret"
    shutil.copytree(root / "hold", outside)
    (outside / "SECRET").write_text("secret")
    sandbox = tmp_path / "runs"
    shutil.copytree(root / "hold", sandbox / "hold")
    (sandbox / "linked").symlink_to(outside, target_is_directory=True)
    (sandbox / "half").mkdir()
    shutil.copy(root / "hold" / "manifest.json", sandbox / "half")
    (sandbox / "half" / "days.jsonl").symlink_to(outside / "days.jsonl")
    served = Served(sandbox)
    try:
        _, listing = served.get("/")
        assert "run=hold" in listing and "linked" not in listing
        for name in ("..", "../secret", str(outside), "linked", "hold/../..", "/etc", "hold/../../secret"):
            assert served.get("/run?" + q(name))[0] == 404, name
            assert served.get("/day?" + q(name, n=0))[0] == 404, name
            assert served.get("/nav.png?" + q(name))[0] == 404, name
        for target in (
            "/run?run=%2e%2e%2fsecret",
            "/run?run=..%2F..%2Fsecret",
            "/../secret/SECRET",
            "/%2e%2e/secret/SECRET",
            "/state?run=%2E%2E",
            "/hold/days.jsonl",
        ):
            assert served.raw(target) in (400, 404), target
        status, html = served.get("/run?" + q("half"))
        assert status == 200 and 'href="/day?run=half' not in html  # the linked days.jsonl is not read
        assert "SECRET" not in json.dumps(served.get("/state?" + q("hold")))
    finally:
        served.close()


def test_broken_lines_and_files_show_an_error_for_that_run_only(root: Path, tmp_path: Path) -> None:
    sandbox = tmp_path / "runs"
    shutil.copytree(root / "scripted", sandbox / "broken")
    shutil.copytree(root / "hold", sandbox / "hold")
    days = (sandbox / "broken" / "days.jsonl").read_text().splitlines()
    days[1] = days[1][:40]
    (sandbox / "broken" / "days.jsonl").write_text("\n".join(days) + "\n" + '{"date": "2025-07-01", "na')
    trajectories = (sandbox / "broken" / "trajectories.jsonl").read_text().splitlines()
    trajectories[3] = trajectories[3][:300]
    (sandbox / "broken" / "trajectories.jsonl").write_text("\n".join(trajectories) + "\n")
    (sandbox / "broken" / "summary.json").write_text("{not json")
    served = Served(sandbox)
    try:
        status, listing = served.get("/")
        assert status == 200 and "summary.json: unreadable" in listing
        status, html = served.get("/run?" + q("broken"))
        assert status == 200 and 'id="problems"' in html
        assert "days.jsonl line 2: not JSON" in html and "last line is not finished" in html
        assert html.count("/day?run=broken&amp;n=") == 4  # the four good days still open
        status, html = served.get("/day?" + q("broken", n=1))
        assert status == 200 and "days.jsonl line 2: not JSON" in html
        status, html = served.get("/day?" + q("broken", n=3))
        assert status == 200 and "not a Trajectory" in html and "NAV at the close" in html
        status, html = served.get("/day?" + q("broken", n=0))
        assert status == 200 and 'id="problem"' not in html and "get_price_data" in html
        assert served.get("/run?" + q("hold"))[0] == 200 and 'id="problems"' not in served.get("/run?" + q("hold"))[1]
    finally:
        served.close()


def test_a_run_being_written_shows_what_is_there_and_grows(root: Path, tmp_path: Path) -> None:
    sandbox = tmp_path / "runs"
    (sandbox / "live").mkdir(parents=True)
    source = root / "scripted"
    shutil.copy(source / "manifest.json", sandbox / "live")
    days = (source / "days.jsonl").read_text().splitlines(keepends=True)
    trajectories = (source / "trajectories.jsonl").read_text().splitlines(keepends=True)
    served = Served(sandbox)
    try:
        _, html = served.get("/run?" + q("live"))
        assert "0 of 0 days" in html and 'src="/nav.png' in html
        before = served.get("/state?" + q("live"))[1]
        with open(sandbox / "live" / "trajectories.jsonl", "a") as t, open(sandbox / "live" / "days.jsonl", "a") as d:
            t.write(trajectories[0])
            t.flush()
            d.write(days[0])
            d.write(days[1][:50])  # the next line half written
            d.flush()
            assert served.get("/state?" + q("live"))[1] != before  # what the page polls changes
            _, html = served.get("/run?" + q("live"))
            assert "1 of 1 days" in html and "last line is not finished" in html
            t.write(trajectories[1])
            t.flush()
            d.write(days[1][50:])
            d.flush()
        _, html = served.get("/run?" + q("live"))
        assert "2 of 2 days" in html and "not finished" not in html
        assert "get_price_data" in served.get("/day?" + q("live", n=1))[1]
    finally:
        served.close()


def test_the_line_index_reads_appends_once_and_restarts_on_a_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"version":2,"id":"a","x":1}\n\n{"version":2,"id":"b"}\n{"id":"c"')
    index = LineIndex(path, keyed=True)
    index.refresh()
    assert len(index) == 2 and index.keys == {"a": 0, "b": 1} and index.partial
    assert index.read(1) == b'{"version":2,"id":"b"}'
    with open(path, "ab") as handle:
        handle.write(b',"task_id":"t"}\n')
    assert index.refresh() and index.keys["c"] == 2 and not index.partial
    assert index.read(2) == b'{"id":"c","task_id":"t"}' and not index.refresh()
    generation = index.generation
    path.write_bytes(b'{"id":"z"}\n')  # --resume rewrote the file shorter
    index.refresh()
    assert index.generation > generation and index.keys == {"z": 0} and len(index) == 1


def test_the_first_request_is_answered_before_the_runs_are_read(root: Path) -> None:
    """Runs are read in the background: while the reader is busy a run's page and the list say they are still
    reading; once it is done they are a fully read dashboard's, byte for byte."""
    busy, reader = threading.Event(), ThreadPoolExecutor(1)
    reader.submit(busy.wait)  # the reader has not got to the runs yet
    served, reference = Served(root, reader=reader), Served(root)
    try:
        pages = ["/", "/run?" + q("tasks-scripted"), "/run?" + q("scripted"), "/day?" + q("tasks-scripted", n=1)]
        for path in pages[1:]:
            status, html = served.get(path, read=False)
            assert status == 200 and 'id="reading"' in html and "MiB" in html
        listing = served.get("/", read=False)[1]
        assert "reading…" in listing and "location.reload()" in listing
        busy.set()
        served.read()
        for path in pages:
            status, html = served.get(path, read=False)
            assert status == 200 and 'id="reading"' not in html and "reading…" not in html
            assert html == reference.get(path)[1]
    finally:
        busy.set()
        served.close()
        reference.close()


def test_a_play_waits_for_its_model_server_off_the_event_loop(server: Served) -> None:
    """A server that accepts the check's connection and never answers: other pages are answered while the
    check waits, and the play is refused in one line once the server goes away."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(30)
        base_url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        form = urllib.parse.urlencode({"date": "2025-06-23", "policy": "llm", "base_url": base_url, "model": "m"})
        answers: list[str] = []

        def post() -> None:
            request = urllib.request.Request(server.url + "/play", data=form.encode())
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append(response.read().decode())

        posting = threading.Thread(target=post)
        posting.start()
        connection, _ = silent.accept()  # the check is waiting on us
        with connection:
            asked = b""
            while b"\r\n\r\n" not in asked:
                asked += connection.recv(4096)
            assert asked.startswith(b"GET /v1/models")
            assert server.get("/")[0] == 200
            connection.setblocking(False)
            with pytest.raises(BlockingIOError):  # the check still waits: it did not give up before the page came
                connection.recv(1)
        posting.join(60)
    assert len(answers) == 1 and f"no server answers at {base_url}" in answers[0]


def test_play_a_day_from_the_page(server: Served, root: Path) -> None:
    data = urllib.parse.urlencode({"date": "2025-06-23", "policy": "momentum"}).encode()
    request = urllib.request.Request(server.url + "/play", data=data)
    with urllib.request.urlopen(request, timeout=30) as response:  # follows the redirect to the watch page
        assert response.status == 200 and "/play/live?id=" in response.read().decode()
        number = urllib.parse.parse_qs(urllib.parse.urlparse(response.url).query)["id"][0]
    deadline = time.monotonic() + 120
    while True:
        live = json.loads(server.get(f"/play/live?id={number}")[1])
        if live["state"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert live["state"] == "done", live["error"]
    assert any(call["name"] == "TakeAction" for m in live["messages"] for call in m["calls"])
    run = live["run"]
    assert run.startswith("plays/2025-06-23-momentum-") and (root / run / "summary.json").is_file()
    assert f"run={run}" in server.get("/")[1]
    status, html = server.get("/day?" + q(run, n=0))
    assert status == 200 and 'id="fills"' in html
    status, html = server.get("/play")
    assert status == 200
    bad = urllib.parse.urlencode({"date": "2025-06-23", "policy": "llm"}).encode()
    with urllib.request.urlopen(urllib.request.Request(server.url + "/play", data=bad), timeout=30) as response:
        assert "needs a served model" in response.read().decode()


def test_another_site_cannot_start_a_play(server: Served, root: Path) -> None:
    """A page on another origin open in the user's browser may POST the form: the dashboard refuses it."""
    plays = sorted((root / "plays").glob("*")) if (root / "plays").is_dir() else []
    data = urllib.parse.urlencode({"date": "2025-06-23", "policy": "hold"}).encode()
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        request = urllib.request.Request(server.url + "/play", data=data, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403
    assert (sorted((root / "plays").glob("*")) if (root / "plays").is_dir() else []) == plays


def test_a_name_that_is_not_the_dashboards_is_refused(server: Served, root: Path, tmp_path: Path) -> None:
    """DNS rebinding: another site's name resolved to 127.0.0.1 makes its page same-origin to the browser, so
    only the Host header tells its requests apart; the bound address, localhost and --allow-host names pass."""
    plays = sorted((root / "plays").glob("*")) if (root / "plays").is_dir() else []
    form = urllib.parse.urlencode({"date": "2025-06-23", "policy": "hold"}).encode()
    rebound = f"Host: evil.example:{server.port}\nOrigin: http://evil.example:{server.port}"
    assert server.raw("/play", rebound, method="POST", body=form) == 403
    assert server.raw("/", f"Host: evil.example:{server.port}") == 403
    assert server.raw("/run?run=hold", "Host: localhost.evil.example") == 403
    assert server.raw("/", "") == 400  # no Host at all
    assert (sorted((root / "plays").glob("*")) if (root / "plays").is_dir() else []) == plays
    for name in ("127.0.0.1", "localhost", "[::1]", "LOCALHOST"):
        assert server.raw("/", f"Host: {name}:{server.port}") == 200, name
    served = Served(root, hosts=allowed_hosts("0.0.0.0", ["research-box"]))
    try:
        assert served.raw("/", "Host: research-box:8501") == 200
        assert served.raw("/", "Host: 127.0.0.1") == 200
        assert served.raw("/", "Host: other-box") == 403
    finally:
        served.close()
    assert allowed_hosts("10.0.0.5") == {"10.0.0.5"}  # bound to one interface: only that address


def test_the_command_binds_to_localhost_by_default(root: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = Path(sys.executable).with_name("trade")
    process = subprocess.Popen(
        [str(script), "eval", "dashboard", "--runs", str(root), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = process.stdout.readline()  # type: ignore[union-attr]
        assert f"http://127.0.0.1:{port}/" in line
        assert "hold" in urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read().decode()
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only (as /proc/net/tcp writes it)
    finally:
        process.terminate()
        process.wait(20)


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (Linux's /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


# -- in a real browser -------------------------------------------------------------------------------


def chromium() -> str | None:
    """Debian's chromium (or $TRADE_CHROMIUM)."""
    return os.environ.get("TRADE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_the_dashboard_in_headless_chromium(server: Served, tmp_path: Path) -> None:
    """Open the list, a run, a day and its conversation, filter a run, play a day; screenshots go to
    $TRADE_SCREENSHOTS (else tmp_path)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the system browser is used)")
    browser_path = chromium()
    if browser_path is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    shots = Path(os.environ.get("TRADE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    requests: list[str] = []
    dialogs: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("request", lambda request: requests.append(request.url))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(server.url + "/")
        page.screenshot(path=shots / "dashboard-runs.png")
        page.locator("#runs a", has_text="scripted").first.click()
        page.wait_for_function("document.querySelector('#nav-chart').naturalWidth > 500")
        page.screenshot(path=shots / "dashboard-run.png", full_page=True)
        page.locator("#rows a").first.click()
        page.wait_for_selector("#conversation")
        conversation = page.locator("#conversation")
        assert conversation.locator(".call .fn", has_text="get_price_data").is_visible()
        reasoning = conversation.locator("details.reasoning pre").first
        assert not reasoning.is_visible()  # folded
        conversation.locator("details.reasoning summary").first.click()
        assert HOSTILE in reasoning.inner_text()
        assert "SH999999 不在股票池中" in page.locator("#refused").inner_text()
        page.screenshot(path=shots / "dashboard-day.png", full_page=True)
        page.set_viewport_size({"width": 1200, "height": 900})
        page.locator("#fills").scroll_into_view_if_needed()
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=shots / "dashboard-day-top.png")
        page.goto(server.url + "/run?" + q("scripted"))
        page.locator("select[name=show]").select_option("failed")
        page.locator("form.filters button", has_text="Filter").click()
        page.wait_for_load_state()
        assert page.locator("#rows tbody tr").count() == 1
        page.goto(server.url + "/play")
        page.fill("input[name=date]", "2025-06-25")
        page.locator("select[name=policy]").select_option("equal-weight")
        page.locator("button[type=submit]").click()
        page.wait_for_function("document.getElementById('state').textContent === 'done'", timeout=120_000)
        assert page.locator("#conversation .call .fn", has_text="TakeAction").count() >= 2
        assert page.locator("#conversation .msg.tool").count() >= 2  # the Episode's answers, as they came
        page.screenshot(path=shots / "dashboard-play.png")
        browser.close()
    assert dialogs == []  # no model text ran as a script
    assert requests and all(url.startswith(server.url) for url in requests)
    for name in (
        "dashboard-runs.png",
        "dashboard-run.png",
        "dashboard-day.png",
        "dashboard-day-top.png",
        "dashboard-play.png",
    ):
        assert (shots / name).stat().st_size > 10_000
