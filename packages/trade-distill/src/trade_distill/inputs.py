"""Where trajectories are read from: trajectory files, and the run folders of trade eval and of training."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from trade_core.errors import TradeError
from trade_tools.trajectory import Trajectory, read_trajectories

FOLDER_LAYOUTS = ("trajectories.jsonl", "trajectories/*.jsonl", "rollouts/trajectories/*.jsonl")
"""Where a run folder keeps trajectories: trade eval (backtest, tasks); verl's rollout folder or training run."""


def trajectory_files(source: Path) -> list[Path]:
    """The trajectory files of a file or run folder; a training run's steps in step order."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise TradeError(f"{source}: no such file or folder")
    for layout in FOLDER_LAYOUTS:
        found = sorted(source.glob(layout), key=lambda path: (len(path.stem), path.stem))
        if found:
            return found
    raise TradeError(f"{source}: no trajectories found", hint=f"looked for {', '.join(FOLDER_LAYOUTS)}")


def read_sources(sources: Sequence[Path]) -> list[Trajectory]:
    """Every trajectory of ``sources``, in order."""
    return [t for source in sources for path in trajectory_files(source) for t in read_trajectories(path)]
