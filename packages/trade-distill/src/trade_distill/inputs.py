"""Where trajectories are read from: trajectory files, and the run folders of trade eval and of training."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_records.runfolder import TRAJECTORY_LAYOUTS
from trade_tools.trajectory import CutShort, Trajectory, read_trajectories


def trajectory_files(source: Path) -> list[Path]:
    """The trajectory files of a file or run folder; a training run's steps in step order."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise TradeError(f"{source}: no such file or folder")
    for layout in TRAJECTORY_LAYOUTS:
        found = sorted(source.glob(layout), key=lambda path: (len(path.stem), path.stem))
        if found:
            return found
    raise TradeError(f"{source}: no trajectories found", hint=f"looked for {', '.join(TRAJECTORY_LAYOUTS)}")


@dataclass
class Inputs:
    """What the inputs held: their trajectories in order, and the last lines left out as cut short."""

    sources: int
    trajectories: list[Trajectory] = field(default_factory=list)
    cut_short: list[CutShort] = field(default_factory=list)

    def report(self) -> None:
        """A warning per line left out, then how many trajectories were read (and lines left out)."""
        for cut in self.cut_short:
            click.echo(f"warning: {cut.message}: left out (a run killed mid-write, or one still writing)", err=True)
        skipped = f"; left out {len(self.cut_short)} last line(s) cut short" if self.cut_short else ""
        click.echo(f"read {len(self.trajectories)} trajectories from {self.sources} input(s){skipped}")


def read_sources(sources: Sequence[Path]) -> Inputs:
    """Every trajectory of ``sources``, in order. A file whose last line is cut short (its writer was killed
    mid-line, or is still writing it) gives the lines before it; every other malformed line is an error."""
    inputs = Inputs(len(sources))
    for path in [path for source in sources for path in trajectory_files(source)]:
        try:
            inputs.trajectories.extend(read_trajectories(path))
        except CutShort as cut:
            inputs.cut_short.append(cut)
    return inputs
