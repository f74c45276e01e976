"""Reading run folders for people: whatever is there, with what is wrong said per run, never a traceback.

A run folder (``trade eval backtest --out``) may be finished, still being written, killed half-way or
damaged by hand. :func:`load_run` keeps every line it can read and lists the rest as problems, so the
report (and the dashboard) show a broken run as an error beside the good ones instead of failing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from trade_core.errors import TradeError, error_line
from trade_records.runfolder import (
    DAYS,
    MANIFEST,
    SEEDS,
    SUMMARY,
    TRAJECTORIES,
    BacktestSummary,
    DayRecord,
    Manifest,
    read_summary,
)
from trade_tools.trajectory import Trajectory

Record = TypeVar("Record", bound=BaseModel)


@dataclass
class NavSeries:
    """NAVs of several named portfolios on the same dates (None where one has no value)."""

    dates: list[str]
    values: dict[str, list[float | None]]

    def on(self, dates: list[str]) -> NavSeries:
        """The series on ``dates`` (a subset of :attr:`dates`), in that order."""
        where = {d: i for i, d in enumerate(self.dates)}
        return NavSeries(dates, {name: [v[where[d]] for d in dates] for name, v in self.values.items()})


@dataclass
class Run:
    """One run folder as read: every part may be missing (see :attr:`problems`)."""

    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    days: list[DayRecord] = field(default_factory=list)
    """The DayRecords of days.jsonl that could be read, in file order."""
    trajectories: dict[str, Trajectory] = field(default_factory=dict)
    """Trajectories by id."""
    summary: BacktestSummary | None = None
    problems: list[str] = field(default_factory=list)
    """What could not be read, one line each, for the reader."""

    @property
    def name(self) -> str:
        return self.path.name

    def setting(self, key: str, kind: type | tuple[type, ...]) -> Any:
        """A manifest field if it has the expected type, else None (a damaged manifest is still shown)."""
        value = self.manifest.get(key)
        return value if isinstance(value, kind) and not isinstance(value, bool) else None

    @property
    def policy(self) -> str:
        """The manifest's policy, else the summary's first row (the backtest writes the policy's first)."""
        return self.setting("policy", str) or next(iter(self.summary.rows if self.summary else ()), "policy")

    @property
    def finished(self) -> bool:
        return self.summary is not None

    def trajectory(self, day: DayRecord) -> Trajectory | None:
        """The trajectory a DayRecord names, if it could be read."""
        return self.trajectories.get(day.trajectory_id)

    def nav(self) -> NavSeries:
        """The NAVs of the summary (policy, baselines, index from the base close on), or, for a run without
        one, the policy's NAV at each finished day's close."""
        nav = self.summary.nav if self.summary else {}
        if "dates" in nav:
            dates = [str(d) for d in nav["dates"]]
            values = {
                str(name): [finite(v) for v in series]
                for name, series in nav.items()
                if name != "dates" and len(series) == len(dates)
            }
            return NavSeries(dates, values)
        return NavSeries([str(d.date) for d in self.days], {self.policy: [d.nav for d in self.days]})


def finite(value: Any) -> float | None:
    """A finite float, or None (JSON null, text, a boolean, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def read_lines(path: Path) -> Iterator[tuple[int, str | None, str]]:
    """``(line number, text or None, problem)`` for each non-blank line; a last line without its newline is an
    unfinished write (a run being written or killed), reported as a problem and not parsed."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            if not line.endswith("\n"):
                yield number, None, f"{path.name}:{number}: unfinished last line (a run still being written?)"
            else:
                yield number, line, ""


def _read_object(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        problems.append(f"{path.name}: unreadable ({error_line(error)})")
        return None
    if not isinstance(found, dict):
        problems.append(f"{path.name}: not a JSON object")
        return None
    return found


def read_records(path: Path, model: type[Record], problems: list[str]) -> list[Record]:
    """The lines of a JSONL file that are ``model`` records; each other line is a problem."""
    found = []
    for number, line, problem in read_lines(path):
        if line is None:
            problems.append(problem)
            continue
        try:
            found.append(model.model_validate_json(line))
        except ValidationError as error:
            problems.append(f"{path.name}:{number}: not a {model.__name__} ({error_line(error)})")
    return found


def _check_manifest(run: Run) -> None:
    if run.manifest:
        try:
            Manifest.model_validate(run.manifest)
        except ValidationError as error:
            run.problems.append(f"{MANIFEST}: not a backtest manifest ({error_line(error)})")


def load_run(path: Path | str) -> Run:
    """Read a run folder; never raises for its contents: what is missing or broken lands in ``problems``. The
    parent of ``--seeds`` runs is no run: a one-line error names its seed folders."""
    run = Run(Path(path))
    if not run.path.is_dir():
        run.problems.append(f"{run.path}: no such run folder")
        return run
    seeds = sorted((p.name for p in run.path.glob("seed-*") if (p / MANIFEST).is_file()), key=lambda n: (len(n), n))
    if not (run.path / MANIFEST).exists() and (run.path / SEEDS).is_file() and seeds:
        raise TradeError(
            f"{run.path} holds the runs of --seeds {len(seeds)}, not one run: pass its seed folders",
            hint=f"trade eval report {' '.join(str(run.path / s) for s in seeds)}",
        )
    parts = {name: run.path / name for name in (MANIFEST, DAYS, TRAJECTORIES, SUMMARY)}
    try:
        if parts[MANIFEST].is_file():
            run.manifest = _read_object(parts[MANIFEST], run.problems) or {}
            _check_manifest(run)
        else:
            run.problems.append(f"{MANIFEST}: missing (not a run folder of trade eval backtest?)")
        if parts[DAYS].is_file():
            run.days = read_records(parts[DAYS], DayRecord, run.problems)
        if parts[TRAJECTORIES].is_file():
            run.trajectories = {t.id: t for t in read_records(parts[TRAJECTORIES], Trajectory, run.problems)}
        if parts[SUMMARY].is_file():
            try:
                run.summary = read_summary(run.path, "backtest")
            except ValueError as error:
                run.problems.append(str(error))
        else:
            planned = len(run.setting("dates", list) or [])
            run.problems.append(
                f"{SUMMARY}: missing (unfinished or killed run): showing {len(run.days)}"
                + (f" of {planned}" if planned else "")
                + " finished days, no baselines"
            )
    except OSError as error:  # a folder that vanishes or turns unreadable while being read
        run.problems.append(f"{run.path}: unreadable ({error_line(error)})")
    return run
