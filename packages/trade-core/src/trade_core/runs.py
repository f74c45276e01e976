"""The run an event belongs to: every event hook that takes a ``run`` argument hears the :class:`RunContext`.

A command that runs something (a backtest, a tasks evaluation, a training run) enters :func:`running`; until it
leaves, :func:`current` answers with the run in this process and in every process it starts:

- a process forked from it (``trade eval tasks --workers N``) inherits the run with ``role="worker"``;
- a process started with its environment (``trade train``'s launch, Ray's workers on the node) reads it from
  :data:`~trade_core.env.RUN`, also as a worker.

So a plugin that keeps per-run state knows which run a call belongs to and whether it is the process that will
hear ``trade_run_finished`` (the parent): a worker's state must reach the parent through the run's folder (see
``examples/risk-plugin``), since the parent never sees a worker's memory.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from trade_core import env
from trade_core.hookspecs import RunKind, trade_run_finished, trade_run_started

if TYPE_CHECKING:
    from trade_core.plugins import TradePluginManager

Role = Literal["parent", "worker"]


@dataclass(frozen=True)
class RunContext:
    """Which run: its kind, its folder (None for a run that writes none), an id unique to this invocation (a
    resumed folder gets a new one), and this process's role in it."""

    kind: RunKind
    folder: Path | None
    run_id: str
    role: Role = "parent"

    def to_env(self) -> str:
        """The run as :data:`~trade_core.env.RUN` carries it to processes started with this environment."""
        return json.dumps({**asdict(self), "folder": str(self.folder) if self.folder else None})


_started: tuple[RunContext, int] | None = None
"""The run this process (or the one it was forked from) entered, and the pid that entered it."""


def current() -> RunContext | None:
    """The run this process works for: entered here (``parent``), inherited by a fork or through the environment
    (``worker``); None outside any run (``trade tools play``, a test calling an Episode)."""
    if _started is not None:
        run, pid = _started
        return run if pid == os.getpid() else replace(run, role="worker")
    raw = os.environ.get(env.RUN)
    return _from_env(raw) if raw else None


@functools.lru_cache(maxsize=4)
def _from_env(raw: str) -> RunContext | None:
    try:
        fields = json.loads(raw)
        folder = fields["folder"]
        return RunContext(fields["kind"], Path(folder) if folder else None, fields["run_id"], "worker")
    except (ValueError, KeyError, TypeError):
        return None  # not ours to judge: a malformed variable means no run, never a crash in a worker


@contextmanager
def running(kind: RunKind, folder: Path | None, manager: TradePluginManager) -> Iterator[RunContext]:
    """Be in a run: ``trade_run_started`` now, ``trade_run_finished`` when the block ends without an error (a
    failed run has not finished), and :func:`current` answering with it meanwhile, here and in its workers."""
    global _started
    run = RunContext(kind, Path(folder) if folder is not None else None, uuid.uuid4().hex[:12])
    previous, outer = _started, os.environ.get(env.RUN)
    _started = (run, os.getpid())
    os.environ[env.RUN] = run.to_env()
    try:
        manager.notify(trade_run_started, run=run)
        yield run
        manager.notify(trade_run_finished, kind=run.kind, folder=run.folder, run=run)
    finally:
        _started = previous
        if outer is None:
            os.environ.pop(env.RUN, None)
        else:
            os.environ[env.RUN] = outer
