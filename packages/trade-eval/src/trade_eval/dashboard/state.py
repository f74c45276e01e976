"""What the dashboard knows of each run folder, kept between requests and brought up to date on each one:
the JSONL files' line indexes and parsed records grow with the files, so a page costs the bytes appended since
the last one, and opening a day reads that day's trajectory line only.

A run's first read (seconds for a run of 10,000 episodes) starts with the first request that lists or names it
and is done in the background, never by a request (nor before the server listens): a run's pages say it is still
being read until that read is done; only then do requests refresh it (so one thread at a time touches a run's
indexes).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trade_core.errors import error_line
from trade_eval.dashboard.folders import RunFolder, part
from trade_eval.dashboard.lines import LineIndex
from trade_eval.dashboard.records import JsonLines, Line
from trade_records.runfolder import MANIFEST, MANIFESTS, METRICS, STEP_FOLDERS, SUMMARY, TRAJECTORIES, read_summary
from trade_tools.trajectory import Trajectory


@dataclass
class Loaded:
    """A JSON file read whole (the manifest as a dict, the summary typed by the run's kind), or why it could not be."""

    value: Any = None
    problem: str = ""


@dataclass
class RunState:
    run: RunFolder
    root: Path
    files: dict[str, JsonLines] = field(default_factory=dict)
    trajectory_files: dict[str, LineIndex] = field(default_factory=dict)
    reading: Future[None] | None = None
    """The background first read, once started; the run's pages wait for it to be done."""

    @property
    def ready(self) -> bool:
        return self.reading is not None and self.reading.done()

    def read_all(self) -> None:
        """Index and parse every file a page reads (the first read, in the background)."""
        self.records()
        self.metrics()
        if self.run.kind != "training":
            self.trajectory_index()

    def records(self) -> list[Line]:
        """The days (backtest) or episodes (tasks) written so far; a training run has none."""
        manifest = MANIFESTS.get(self.run.kind)
        return self._lines(manifest.RECORDS) if manifest else []

    def metrics(self) -> list[Line]:
        """A training run's metrics lines."""
        return self._lines(METRICS)

    def _lines(self, name: str) -> list[Line]:
        path = part(self.run, self.root, name)
        if path is None:
            self.files.pop(name, None)
            return []
        if name not in self.files:
            self.files[name] = JsonLines(path)
        return self.files[name].refresh()

    def partial(self, name: str) -> bool:
        return name in self.files and self.files[name].partial

    def json_file(self, name: str) -> Loaded:
        path = part(self.run, self.root, name)
        if path is None:
            return Loaded()
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return Loaded(None, f"{name}: unreadable ({error_line(error)})")
        return Loaded(value, "") if isinstance(value, dict) else Loaded(None, f"{name}: not a JSON object")

    def manifest(self) -> Loaded:
        return self.json_file(MANIFEST)

    def summary(self) -> Loaded:
        """The finished run's :class:`BacktestSummary` or :class:`TasksSummary`, or why it is not one."""
        if part(self.run, self.root, SUMMARY) is None or self.run.kind not in MANIFESTS:
            return Loaded()
        try:
            return Loaded(read_summary(self.run.path, self.run.kind))
        except OSError as error:
            return Loaded(None, f"{SUMMARY}: unreadable ({error_line(error)})")
        except ValueError as error:
            return Loaded(None, str(error))

    def steps(self) -> dict[int, Path]:
        """A training run's ``{step}.jsonl`` files by step."""
        found: dict[int, Path] = {}
        for sub in STEP_FOLDERS:
            folder = part(self.run, self.root, sub)
            if folder is None or not folder.is_dir():
                continue
            for entry in os.scandir(folder):
                stem = entry.name.removesuffix(".jsonl")
                if (
                    entry.name.endswith(".jsonl")
                    and stem.isdigit()
                    and (path := part(self.run, self.root, sub, entry.name))
                ):
                    found[int(stem)] = path
        return dict(sorted(found.items()))

    def trajectory_index(self, step: int | None = None) -> LineIndex | None:
        """The offsets of the run's trajectories file (of one step's, for training)."""
        path = part(self.run, self.root, TRAJECTORIES) if step is None else self.steps().get(step)
        if path is None:
            return None
        key = str(path)
        if key not in self.trajectory_files:
            self.trajectory_files[key] = LineIndex(path, keyed=True)
        index = self.trajectory_files[key]
        index.refresh()
        return index

    def trajectory(
        self, trajectory_id: str | None = None, *, step: int | None = None, line: int | None = None
    ) -> tuple[Trajectory | None, str]:
        """One trajectory by id (or by line of a step's file), read from its line alone; or why not."""
        index = self.trajectory_index(step)
        if index is None:
            return None, f"{TRAJECTORIES if step is None else f'step {step}'}: missing"
        number = index.keys.get(trajectory_id) if trajectory_id is not None else line
        if number is None or not 0 <= number < len(index):
            return None, "no trajectory recorded for it (yet)" if trajectory_id else "no such trajectory"
        try:
            return Trajectory.model_validate_json(index.read(number)), ""
        except ValidationError as error:
            return None, f"{index.path.name} line {number + 1}: not a Trajectory ({error_line(error)})"

    def files_state(self) -> dict[str, list[int]]:
        """Size and modification time of each file, for a page that polls for changes."""
        state = {}
        for entry in os.scandir(self.run.path):
            if entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                state[entry.name] = [stat.st_size, stat.st_mtime_ns]
        for step, path in self.steps().items():
            stat = path.stat()
            state[f"step {step}"] = [stat.st_size, stat.st_mtime_ns]
        return state


class States:
    """The RunStates by run name, made on first use, each read first on ``reader`` (one background thread unless
    given: one run's first read at a time leaves the other core to the requests)."""

    def __init__(self, root: Path, reader: Executor | None = None) -> None:
        self.root = root.resolve()
        self.by_name: dict[str, RunState] = {}
        self.reader = reader or ThreadPoolExecutor(1, thread_name_prefix="dashboard-read")

    def get(self, run: RunFolder) -> RunState:
        """The run's state, its first read started in the background if it was not (see :attr:`RunState.ready`)."""
        state = self.by_name.get(run.name)
        if state is None or state.run != run:
            state = self.by_name[run.name] = RunState(run, self.root)
        if state.reading is None:
            state.reading = self.reader.submit(state.read_all)
        return state
