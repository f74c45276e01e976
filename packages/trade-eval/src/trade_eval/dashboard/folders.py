"""The run folders under ``--runs``, found by what they hold, and the only paths the dashboard ever opens.

A request names a run by the name this listing gave it (its path relative to ``--runs``), never by a path: a
name that is not listed is unknown. Symbolic links are not followed out of ``--runs`` (a link inside it to a
folder or file elsewhere is skipped), so the app serves nothing outside the folder it was given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from trade_eval.runfolder import DAYS, MANIFEST, TRAJECTORIES
from trade_eval.tasks_eval import EPISODES

Kind = Literal["backtest", "tasks", "training"]
METRICS = "metrics.jsonl"
"""A training run's metrics per step (trl-grpo writes it; verl's file logger too, where it is pointed there)."""
STEP_FOLDERS = ("rollouts/trajectories", "trajectories")
"""Where a training run's ``{step}.jsonl`` Trajectory records are (trl-grpo; verl's rollout_data_dir)."""
MAX_DEPTH = 4


@dataclass(frozen=True)
class RunFolder:
    name: str
    """Its path relative to ``--runs``, with ``/``: how pages address it."""
    path: Path
    kind: Kind


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, with every link resolved, is ``root`` or below it (``root`` resolved already)."""
    try:
        return path.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):
        return False


def kind_of(folder: Path) -> Kind | None:
    if (folder / EPISODES).exists():
        return "tasks"
    if (folder / DAYS).exists() or (folder / TRAJECTORIES).exists() or _backtest(folder):
        return "backtest"
    if (folder / METRICS).exists() or any((folder / sub).is_dir() for sub in STEP_FOLDERS):
        return "training"
    return None


def _backtest(folder: Path) -> bool:
    """A manifest with nothing else yet: a run that has just started (tasks manifests say ``"kind": "tasks"``)."""
    if not (folder / MANIFEST).is_file():
        return False
    try:
        head = (folder / MANIFEST).read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return False
    return '"kind": "tasks"' not in head and '"kind":"tasks"' not in head and '"splits"' not in head


def discover(root: Path) -> dict[str, RunFolder]:
    """Every run folder under ``root`` (itself included), by name; links are not followed."""
    root = root.resolve()
    found: dict[str, RunFolder] = {}
    for current, folders, _ in os.walk(root, followlinks=False):
        here = Path(current)
        depth = len(here.relative_to(root).parts)
        kind = kind_of(here)
        if kind is not None and inside(root, here):
            name = here.relative_to(root).as_posix()
            found[name if name != "." else ""] = RunFolder(name if name != "." else "", here, kind)
            folders.clear()  # a run's subfolders (rollouts) are parts of it
        folders[:] = sorted(f for f in folders if depth < MAX_DEPTH and not f.startswith("."))
    return dict(sorted(found.items()))


def part(run: RunFolder, root: Path, *names: str) -> Path | None:
    """A file of a run, or None when it is missing or a link that leads out of ``root``."""
    path = run.path.joinpath(*names)
    if not path.exists() and not path.is_symlink():
        return None
    return path if inside(root.resolve(), path) else None
