"""A small resumable runner: stages run in order, each into its own folder, each recorded once finished.

``OUT/quickstart.json`` (written atomically after every stage) holds the run's settings and each finished
stage's time and result. A rerun skips the finished stages and starts the first unfinished one afresh (its
folder, possibly half written by an interrupted try, is removed first); a rerun with other settings is refused,
since the finished stages were made with the old ones.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import structlog
from pydantic import BaseModel, Field

from trade_core.errors import TradeError
from trade_core.files import atomic_write
from trade_train.quickstart.settings import QuickstartSettings

log = structlog.get_logger("trade.quickstart")

STATE = "quickstart.json"


class Finished(BaseModel):
    seconds: float
    result: dict[str, Any] = Field(default_factory=dict, description="what later stages and the report read")


class State(BaseModel):
    """``quickstart.json``."""

    settings: QuickstartSettings
    finished: dict[str, Finished] = Field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """What a stage gets: the run folder, its settings and the results of the stages before it."""

    out: Path
    settings: QuickstartSettings
    results: dict[str, dict[str, Any]]

    def folder(self, stage: str) -> Path:
        return self.out / stage


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    run: Callable[[Context], dict[str, Any]]


def load_state(out: Path, settings: QuickstartSettings) -> State:
    """The run's state: a fresh one, or the one in ``out`` if it was started with the same settings."""
    path = out / STATE
    if not path.is_file():
        return State(settings=settings)
    state = State.model_validate_json(path.read_text(encoding="utf-8"))
    if state.settings != settings:
        mine, theirs = settings.model_dump(), state.settings.model_dump()
        differ = [
            f"--{key.replace('_', '-')} {theirs[key]} (now {mine[key]})" for key in mine if mine[key] != theirs[key]
        ]
        raise TradeError(
            f"{out} was started with {', '.join(differ)}",
            hint="rerun with the flags it was started with to resume, or choose another --out",
        )
    return state


def give_back_memory() -> None:
    """Return what a stage freed to the system before the next stage (glibc keeps freed memory for reuse): the
    fine-tune of a pretrained model peaks near 19 GB, and the evaluation after it ran a 24 GB machine out."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its allocator returns memory its own way
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def run_stages(
    out: Path, settings: QuickstartSettings, stages: Sequence[Stage], *, stop_after: str | None = None
) -> State:
    """Run the unfinished stages in order (up to ``stop_after``), recording each; returns the state. A folder
    this call created is removed again when its first stage fails: a refused run leaves nothing behind."""
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _run(out, load_state(out, settings), settings, stages, stop_after)
    except BaseException:
        if created and not (out / STATE).exists():
            shutil.rmtree(out, ignore_errors=True)
        raise


def _run(
    out: Path, state: State, settings: QuickstartSettings, stages: Sequence[Stage], stop_after: str | None
) -> State:
    for number, stage in enumerate(stages, 1):
        label = f"[{number}/{len(stages)}] {stage.title}"
        if stage.name in state.finished:
            click.echo(f"{label}: done before ({state.finished[stage.name].seconds:.0f} s), skipped")
        else:
            click.echo(f"{label} ...")
            shutil.rmtree(out / stage.name, ignore_errors=True)  # what an interrupted try left
            started = time.perf_counter()
            context = Context(out, settings, {name: f.result for name, f in state.finished.items()})
            result = stage.run(context)
            give_back_memory()
            state.finished[stage.name] = Finished(seconds=round(time.perf_counter() - started, 1), result=result)
            atomic_write(out / STATE, state.model_dump_json(indent=2) + "\n")
            log.info("quickstart.stage", stage=stage.name, seconds=state.finished[stage.name].seconds)
            click.echo(f"{label}: {state.finished[stage.name].seconds:.0f} s")
        if stage.name == stop_after:
            break
    return state
