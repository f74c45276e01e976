"""Event hooks observed on real runs: each tool call, an order a plugin vetoes, an episode's end, a run's start and
finish with its context (in the parent and in forked workers), a finished backtest and tasks run.

The example plugin (examples/risk-plugin) is registered on a fresh manager for the in-process runs and really
pip-installed for the CLI listing, as a user's ``pip install`` gives it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trade_core import hookimpl
from trade_core.errors import PluginError
from trade_core.files import append_line, read_jsonl
from trade_core.plugins import TradePluginManager, load_entry_points, new_manager
from trade_core.runs import RunContext
from trade_core.testing import inline_plugin, run_trade
from trade_data.store import MarketStore
from trade_data.synth import write_synthetic_market
from trade_eval.backtest import Backtest, new_manifest, run_backtest
from trade_eval.policies.baselines import EqualWeight
from trade_eval.policy import RunSettings
from trade_eval.single_day import TasksEval, load_tasks, run_tasks
from trade_eval.single_day import new_manifest as new_tasks_manifest
from trade_reward.schemes import get_scheme
from trade_reward.taskbuilder import build_tasks
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.records import Task

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "risk-plugin"
POOL = ["SH600002", "SZ000001", "SZ000002"]


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> MarketStore:
    """A synthetic market of 10 stocks over 2020's first quarter, as `trade data synth` leaves one."""
    out = write_synthetic_market(tmp_path_factory.mktemp("synth") / "m", 10, "2020-01-01", "2020-03-31")
    return MarketStore.load(out)


@pytest.fixture
def manager() -> TradePluginManager:
    """Every installed plugin on a manager of the test's own: the process-wide one never sees the inline plugins."""
    manager = new_manager()
    load_entry_points(manager)
    return manager


@pytest.fixture
def risk_cap(manager: TradePluginManager, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example plugin's module, registered on ``manager`` with a cap of 25% of the portfolio."""
    spec = importlib.util.spec_from_file_location("trade_risk_cap", EXAMPLE / "src" / "trade_risk_cap" / "__init__.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    monkeypatch.setenv("TRADE_RISK_CAP", "0.25")
    manager.register(module, "risk-cap")
    return module


def _episode(synth: MarketStore, manager: TradePluginManager) -> Episode:
    task = Task(task_id="hooks", date=synth.dates[30].astype(object), pool=POOL, cash=1_000_000.0)
    return Episode.start(task, synth, manager=manager)


def test_each_tool_call_is_heard_with_what_the_model_wrote_and_read(
    synth: MarketStore, manager: TradePluginManager
) -> None:
    heard: list[tuple[str, Any, str, int]] = []

    class Listener:
        @hookimpl
        def trade_tool_called(self, episode: Episode, name: str, arguments: Any, answer: str) -> None:
            heard.append((name, arguments, answer, episode.tool_calls))

    with inline_plugin(manager, Listener(), "listener"):
        episode = _episode(synth, manager)
        calls = [
            ("get_price_data", json.dumps({"symbol": POOL[0]})),
            ("get_news", "{}"),
            ("TakeAction", {"type": "stop", "reasoning": "观望"}),
        ]
        answers = [episode.call(name, arguments) for name, arguments in calls]
    assert heard == [(n, a, text, i) for i, ((n, a), text) in enumerate(zip(calls, answers, strict=True), start=1)]
    assert answers[1].startswith("错误：未知工具") and answers[2].startswith("已结束今日交易")


def test_a_vetoed_order_changes_nothing_and_the_model_reads_why(
    synth: MarketStore, manager: TradePluginManager, risk_cap: ModuleType
) -> None:
    episode = _episode(synth, manager)
    close = episode.view.last_close(POOL[0])
    big = int(0.3 * 1_000_000 / close) // 100 * 100  # 30% of the portfolio: over the cap
    before = episode.model_dump()
    answer = episode.call("TakeAction", {"type": "buy", "symbol": POOL[0], "amount": big})
    assert answer.startswith("错误：订单被否决：买入后该股票将占组合的3") and answer.endswith("超过单只股票25%的上限")
    after = episode.model_dump()
    assert (after["tool_calls"], after["tool_errors"]) == (1, 1)
    assert {k: v for k, v in after.items() if k not in ("tool_calls", "tool_errors")} == {
        k: v for k, v in before.items() if k not in ("tool_calls", "tool_errors")
    }

    small = int(0.2 * 1_000_000 / close) // 100 * 100
    assert episode.call("TakeAction", {"type": "buy", "symbol": POOL[0], "amount": small}).startswith("成交：买入")
    assert episode.positions[POOL[0]].shares == small and len(episode.actions) == 1


def _backtest(synth: MarketStore, manager: TradePluginManager, out: Path, resume: bool = False) -> dict[str, Any]:
    start = synth.dates[30].astype(object)
    backtest = Backtest(synth, start, 3, pool=POOL, manager=manager)
    manifest = new_manifest(
        backtest, "equal-weight", RunSettings(), command=["test"], data=synth.path, pool_file=None, pool_size=None
    )
    return run_backtest(backtest, EqualWeight(), RunSettings(), out, manifest, progress=False, resume=resume)


def test_a_backtest_under_the_example_plugin_holds_cash_and_notes_the_vetoes_in_its_folder(
    synth: MarketStore, manager: TradePluginManager, risk_cap: ModuleType, tmp_path: Path
) -> None:
    finished: list[tuple[str, Path]] = []

    class Watcher:
        @hookimpl
        def trade_run_finished(self, kind: str, folder: Path) -> None:  # a plugin may take fewer arguments
            finished.append((kind, folder))
            assert (folder / "summary.json").is_file()  # the folder is complete when the hook runs

    with inline_plugin(manager, Watcher(), "watcher"):
        _backtest(synth, manager, tmp_path / "capped")
    assert finished == [("backtest", tmp_path / "capped")]
    finished.clear()
    days = [json.loads(line) for line in (tmp_path / "capped" / "days.jsonl").read_text().splitlines()]
    assert [day["holdings"] for day in days] == [{}, {}, {}]  # equal weight in 3 stocks is 33% each: all vetoed
    note = json.loads((tmp_path / "capped" / "risk_cap.json").read_text())
    assert (note["kind"], note["cap"]) == ("backtest", 0.25)
    assert {(v["date"], v["symbol"]) for v in note["vetoed"]} == {(d["date"], s) for d in days for s in POOL}
    assert all(v["weight"] > 0.25 for v in note["vetoed"])
    _backtest(synth, manager, tmp_path / "capped", resume=True)  # a second run of the folder notes its own vetoes
    again = json.loads((tmp_path / "capped" / "risk_cap.json").read_text())
    every = read_jsonl(tmp_path / "capped" / risk_cap.VETOES)  # the baselines' plays are asked too
    assert again["run_id"] != note["run_id"] and len(every) == len(note["vetoed"]) + len(again["vetoed"])

    plain = new_manager()
    load_entry_points(plain)
    _backtest(synth, plain, tmp_path / "free")  # the installed plugins only: no cap
    free = [json.loads(line) for line in (tmp_path / "free" / "days.jsonl").read_text().splitlines()]
    assert set(free[0]["holdings"]) == set(POOL) and not (tmp_path / "free" / "risk_cap.json").exists()


def test_an_observer_that_raises_is_reported_once_and_the_run_goes_on(
    synth: MarketStore, manager: TradePluginManager, tmp_path: Path
) -> None:
    calls: list[str] = []

    class Broken:
        @hookimpl
        def trade_tool_called(self, episode: Episode, name: str, arguments: Any, answer: str) -> None:
            calls.append(name)
            raise RuntimeError("broken on purpose")

    with inline_plugin(manager, Broken(), "broken"):
        _backtest(synth, manager, tmp_path / "run")
    assert [(f.origin.name, f.hook) for f in manager.failures] == [("broken", "trade_tool_called")]
    assert len(calls) == 1  # not asked again
    days = [json.loads(line) for line in (tmp_path / "run" / "days.jsonl").read_text().splitlines()]
    assert set(days[0]["holdings"]) == set(POOL)


def test_a_veto_that_raises_blocks_every_order_it_is_asked_about(
    synth: MarketStore, manager: TradePluginManager, tmp_path: Path
) -> None:
    """The veto fails closed: a risk check that cannot run must not let the order through, this time or the next."""
    asked: list[str] = []

    class Broken:
        @hookimpl
        def trade_veto_order(self, episode: Episode, order: Any) -> str | None:
            asked.append(order.symbol)
            raise RuntimeError("broken on purpose")

    with inline_plugin(manager, Broken(), "broken"):
        episode = _episode(synth, manager)
        first = episode.call("TakeAction", {"type": "buy", "symbol": POOL[0], "amount": 100})
        second = episode.call("TakeAction", {"type": "buy", "symbol": POOL[1], "amount": 100})
        _backtest(synth, manager, tmp_path / "run")
    assert first == "错误：订单被否决：broken检查失败" and second == first
    assert asked[:2] == POOL[:2] and len(asked) > 2 and not episode.positions and manager.failures == []
    days = [json.loads(line) for line in (tmp_path / "run" / "days.jsonl").read_text().splitlines()]
    assert all(day["holdings"] == {} for day in days)  # every buy of the backtest vetoed


def test_strict_mode_ends_the_run_with_one_line(synth: MarketStore, manager: TradePluginManager) -> None:
    class Broken:
        @hookimpl
        def trade_veto_order(self, episode: Episode, order: Any) -> str | None:
            raise RuntimeError("broken on purpose")

    with inline_plugin(manager, Broken(), "broken"), pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRADE_STRICT_PLUGINS", "1")
        episode = _episode(synth, manager)
        with pytest.raises(PluginError, match=r"plugin 'broken' from .* failed in trade_veto_order: RuntimeError"):
            episode.call("TakeAction", {"type": "buy", "symbol": POOL[0], "amount": 100})
        with pytest.raises(PluginError):
            _backtest(synth, manager, synth.path.parent / "strict")


@pytest.mark.slow  # pip-installs the example
def test_the_installed_example_is_listed_with_the_events_it_hears(synth: MarketStore, tmp_path: Path) -> None:
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(EXAMPLE)]
    subprocess.run(pip, check=True)
    run = run_trade("plugins", "--json", env={"PYTHONPATH": str(site)})
    assert run.code == 0, run.err
    row = next(p for p in json.loads(run.out)["plugins"] if p["name"] == "risk-cap")
    assert (row["distribution"], row["status"], row["hooks"]) == ("trade-risk-cap", "ok", {})
    assert row["events"] == ["trade_run_finished", "trade_veto_order"]
    text = run_trade("plugins", env={"PYTHONPATH": str(site)}).out
    listed = "risk-cap  (trade-risk-cap 0.1.0, trade_risk_cap)\n    events: trade_run_finished, trade_veto_order\n"
    assert listed in text
    assert run_trade("plugins", env={"PYTHONPATH": str(site), "TRADE_DISABLE_PLUGINS": "tools"}).code == 0

    # A veto that cannot run (a cap that is no number) blocks the order; under strict mode it ends the play in one
    # line instead of the model's turn.
    play = ["tools", "play", "--data", str(synth.path), "--date", str(synth.dates[30])[:10], "--pool", ",".join(POOL)]
    broken = {"PYTHONPATH": str(site), "TRADE_RISK_CAP": "a lot"}
    blocked = run_trade(*play, env=broken, input=f"buy {POOL[0]} 100\nstop\n")
    assert blocked.code == 0 and "错误：订单被否决：risk-cap检查失败" in blocked.out, blocked.out
    strict = run_trade(*play, env={**broken, "TRADE_STRICT_PLUGINS": "1"}, input=f"buy {POOL[0]} 100\nstop\n")
    last = strict.err.strip().splitlines()[-1]  # after the play's own `trade>` prompt
    failed = "error: plugin 'risk-cap' from trade-risk-cap 0.1.0 failed in trade_veto_order: ValueError"
    assert strict.code == 2 and failed in last and "Traceback" not in strict.err, strict.err


class RunWatcher:
    """Hears every run and episode event; what it hears in any process goes to one file, a line each."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def heard(self, event: str, run: RunContext | None, **fields: Any) -> None:
        line = {"event": event, "pid": os.getpid(), **fields}
        if run is not None:
            line |= {"run_id": run.run_id, "role": run.role, "kind": run.kind, "folder": str(run.folder)}
        append_line(self.path, json.dumps(line))

    @hookimpl
    def trade_run_started(self, run: RunContext) -> None:
        self.heard("started", run)

    @hookimpl
    def trade_run_finished(self, kind: str, folder: Path, run: RunContext) -> None:
        self.heard("finished", run, summary=(folder / "summary.json").is_file())

    @hookimpl
    def trade_episode_finished(self, episode: Episode, run: RunContext | None) -> None:
        self.heard("episode", run, status=episode.status, task=episode.task.task_id)

    @hookimpl
    def trade_tool_called(self, episode: Episode, name: str, run: RunContext | None) -> None:
        self.heard("call", run, name=name, status=episode.status, task=episode.task.task_id)


def test_a_tasks_run_with_workers_notes_every_veto_and_every_event_knows_its_run(
    sample_dataset: Path,
    manager: TradePluginManager,
    risk_cap: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forked workers play the episodes and hear them as ``role="worker"`` of the parent's run; the example
    plugin's note, written in the parent, holds every veto the workers made: the same as played in one process."""
    monkeypatch.setenv("TRADE_RISK_CAP", "0.1")  # equal weight in 4 stocks buys 25% of the portfolio each
    tasks = tmp_path / "tasks"
    build_tasks(sample_dataset, tasks, split="test=2025-07-01:2025-07-10", pool_size="4", per_day=2, seed=3)
    records, split, _ = load_tasks(tasks, "test")
    store = MarketStore.load(sample_dataset)
    notes, events = {}, {}
    for workers in (1, 2):
        out, heard = tmp_path / f"workers-{workers}", tmp_path / f"heard-{workers}.jsonl"
        evaluation = TasksEval(store, records, [get_scheme("bucketed")], manager=manager)
        manifest = new_tasks_manifest(
            evaluation, "equal-weight", RunSettings(), command=[], tasks=tasks, split=split, servers=(), data=store.path
        )
        with inline_plugin(manager, RunWatcher(heard), "watcher"):
            run_tasks(evaluation, EqualWeight(), RunSettings(), out, manifest, workers=workers, progress=False)
        notes[workers] = json.loads((out / "risk_cap.json").read_text())
        events[workers] = read_jsonl(heard)

    def vetoes(note: dict[str, Any]) -> list[tuple[str, str, int]]:
        return sorted((v["date"], v["symbol"], v["shares"]) for v in note["vetoed"])

    assert len(vetoes(notes[1])) >= len(records) and vetoes(notes[2]) == vetoes(notes[1])
    assert notes[2]["cap"] == 0.1
    parent = os.getpid()
    assert {v["pid"] for v in notes[1]["vetoed"]} == {parent}
    assert len({v["pid"] for v in notes[2]["vetoed"]}) == 2 and parent not in {v["pid"] for v in notes[2]["vetoed"]}
    for workers, heard in events.items():
        started, *played, finished = heard
        run_id = started["run_id"]
        assert (started["event"], started["role"], started["pid"], started["kind"]) == (
            "started",
            "parent",
            parent,
            "tasks",
        )
        assert (finished["event"], finished["run_id"], finished["role"], finished["summary"]) == (
            "finished",
            run_id,
            "parent",
            True,
        )
        assert finished["folder"] == str(tmp_path / f"workers-{workers}") and notes[workers]["run_id"] == run_id
        assert {line["run_id"] for line in played} == {run_id}
        roles = {line["role"] for line in played}
        assert roles == ({"parent"} if workers == 1 else {"worker"})
        ended = [line for line in played if line["event"] == "episode"]
        assert len(ended) == len(records) and {line["status"] for line in ended} == {"stopped"}
        for record in records:  # each episode's end is heard once, after the call that stopped it
            own = [(line["event"], line["status"]) for line in played if line["task"] == record.task.task_id]
            assert own[-2:] == [("call", "stopped"), ("episode", "stopped")] and own.count(own[-1]) == 1


def test_a_reply_without_a_tool_call_ends_the_episode_and_plugins_hear_it(
    synth: MarketStore, manager: TradePluginManager, tmp_path: Path
) -> None:
    heard = tmp_path / "heard.jsonl"
    with inline_plugin(manager, RunWatcher(heard), "watcher"):
        day = TradingDay(_episode(synth, manager))
        day.turn("我先想一想，今天不操作。", [])
        day.turn("again", [])  # an ended day hears nothing more
    lines = read_jsonl(heard)
    assert [(line["event"], line["status"]) for line in lines] == [("episode", "failed")]
    assert "run_id" not in lines[0]  # outside a run: no run context
