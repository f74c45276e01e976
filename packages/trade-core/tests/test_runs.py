"""A run's context: what its events hear in the process that runs it, in a fork of it and in a process started
with its environment, and that a run which fails never finishes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trade_core import env, hookimpl, runs
from trade_core.plugins import TradePluginManager
from trade_core.runs import RunContext


class Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    @hookimpl
    def trade_run_started(self, run: RunContext) -> None:
        self.events.append(("started", run))

    @hookimpl
    def trade_run_finished(self, kind: str, folder: Path | None, run: RunContext) -> None:
        self.events.append(("finished", (kind, folder, run)))


def _in_fork(queue: Any) -> None:
    queue.put(runs.current())


def test_a_run_is_heard_starting_and_finishing_and_its_workers_know_it(
    plugin_manager: TradePluginManager, tmp_path: Path
) -> None:
    heard = Heard()
    plugin_manager.register(heard, "heard")
    assert runs.current() is None and env.RUN not in os.environ
    with runs.running("backtest", tmp_path, plugin_manager) as run:
        assert heard.events == [("started", run)] and runs.current() == run
        assert (run.kind, run.folder, run.role, len(run.run_id)) == ("backtest", tmp_path, "parent", 12)
        fork = multiprocessing.get_context("fork")
        queue = fork.Queue()
        child = fork.Process(target=_in_fork, args=(queue,))
        child.start()
        forked = queue.get(timeout=30)
        child.join()
        started = subprocess.run(
            [sys.executable, "-c", "from trade_core import runs; print(runs.current())"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert forked == RunContext("backtest", tmp_path, run.run_id, "worker")
    assert started.stdout.strip() == repr(RunContext("backtest", tmp_path, run.run_id, "worker"))
    assert heard.events[1] == ("finished", ("backtest", tmp_path, run))
    assert runs.current() is None and env.RUN not in os.environ


def test_a_run_that_fails_does_not_finish_and_leaves_no_context(
    plugin_manager: TradePluginManager, tmp_path: Path
) -> None:
    heard = Heard()
    plugin_manager.register(heard, "heard")
    with pytest.raises(RuntimeError), runs.running("tasks", tmp_path, plugin_manager):
        raise RuntimeError("the run broke")
    assert [event for event, _ in heard.events] == ["started"]
    assert runs.current() is None and env.RUN not in os.environ


def test_a_run_inside_a_run_gives_the_outer_one_back(plugin_manager: TradePluginManager, tmp_path: Path) -> None:
    """The quickstart runs a training run, then evaluations, inside one command: each event hears its own."""
    with runs.running("training", tmp_path / "a", plugin_manager) as outer:
        with runs.running("tasks", tmp_path / "b", plugin_manager) as inner:
            assert runs.current() == inner and json.loads(os.environ[env.RUN])["run_id"] == inner.run_id
        assert runs.current() == outer and json.loads(os.environ[env.RUN])["run_id"] == outer.run_id


@pytest.mark.parametrize("raw", ["{", "[]", '{"kind": "tasks"}', "null"])
def test_a_malformed_run_variable_means_no_run(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.RUN, raw)
    assert runs.current() is None
