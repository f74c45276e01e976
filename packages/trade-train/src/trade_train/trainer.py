"""The trainer interface: a run is preflighted, planned (files, command, environment), checked, then launched.

Planning never starts anything, so ``trade train --dry-run`` shows exactly what a real run would do.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from trade_core.errors import TradeError
from trade_core.files import atomic_write
from trade_core.registry import Registry
from trade_train import hookspecs


class TrainSpec(BaseModel):
    """What the user asked for on the command line."""

    model: str = Field(description="model folder (HF format) or hub id reachable from the training machine")
    tasks: Path | None = Field(None, description="folder of `trade data tasks` (train.jsonl, val.jsonl, manifest.json)")
    dataset: Path | None = Field(None, description="rows file, for a trainer that reads one (swift-lora)")
    data: Path | None = Field(None, description="dataset the tools read; default: the one in the tasks manifest")
    device: Literal["npu", "gpu", "cpu"] = "npu"
    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(8, ge=1)
    reward: str = "bucketed"
    run_dir: Path
    logger: tuple[str, ...] = ("console",)
    tool_format: str | None = Field(None, description="verl multi_turn.format; default from the model family")
    overrides: tuple[str, ...] = Field((), description="extra Hydra overrides, applied last")


class RunPlan(BaseModel):
    """Everything a launch needs, written into the run folder before anything starts."""

    run_dir: Path
    command: list[str]
    env: dict[str, str]
    files: dict[str, str | bytes] = Field(description="file name in the run folder -> content (text or binary)")

    def write(self) -> None:
        """Write the run folder: the generated files, the resolved command and the environment."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for name, content in self.files.items():
            atomic_write(self.run_dir / name, content)
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(self.env.items()))
        atomic_write(self.run_dir / "command.sh", f"#!/usr/bin/env bash\n{exports}{shlex.join(self.command)}\n")
        atomic_write(self.run_dir / "env.json", json.dumps(self.env, indent=2, sort_keys=True) + "\n")

    def launch(self) -> int:
        """Run the command in the run folder with the plan's environment; returns its exit status."""
        done = subprocess.run(self.command, cwd=self.run_dir, env={**os.environ, **self.env}, check=False)
        return done.returncode


class Trainer(ABC):
    """A way to train the agent; registered through ``trade_register_trainers``."""

    name: ClassVar[str]
    description: ClassVar[str]

    def preflight(self, spec: TrainSpec, *, launch: bool) -> list[TradeError]:
        """Every problem that would stop the run, found before anything is written or started; none: go ahead.

        A dry run and a launch run it alike; ``launch`` adds what only the machine that trains needs (a dry run
        plans anywhere). The default checks what every trainer reads: the model, the tasks and the run folder.
        """
        from trade_train.preflight import spec_problems

        return spec_problems(spec)

    @abstractmethod
    def plan(self, spec: TrainSpec) -> RunPlan:
        """Compose the run (no side effects)."""

    @abstractmethod
    def check(self, plan: RunPlan) -> str:
        """Validate the plan against the training framework's own schema; a summary on success."""


TRAINERS = Registry(hookspecs.trade_register_trainers, "trainer", Trainer)
"""Every trainer by name (``trade train --trainer NAME``)."""
