"""The run folders under ``--runs``, found by what they hold, and the only paths the dashboard ever opens.

A request names a run by the name this listing gave it (its path relative to ``--runs``), never by a path: a
name that is not listed is unknown. Symbolic links are not followed out of ``--runs`` (a link inside it to a
folder or file elsewhere is skipped), so the app serves nothing outside the folder it was given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trade_core.hookspecs import RunKind
from trade_records.runfolder import kind_of

MAX_DEPTH = 4


@dataclass(frozen=True)
class RunFolder:
    name: str
    """Its path relative to ``--runs``, with ``/``: how pages address it."""
    path: Path
    kind: RunKind


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, with every link resolved, is ``root`` or below it (``root`` resolved already)."""
    try:
        return path.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):
        return False


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
