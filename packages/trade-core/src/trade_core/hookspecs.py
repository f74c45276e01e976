"""The hooks every trade-agent host understands.

Hooks that contribute named things take a ``register`` callback instead of returning
values, so the registry knows which plugin supplied each item and can refuse duplicate
names (see :mod:`trade_core.registry`). Event hooks (:func:`eventspec`) tell plugins what happens (a tool
call, an order, a training step, a finished run) and are called once per plugin, so one that raises is
skipped without silencing the others (:meth:`~trade_core.plugins.TradePluginManager.notify`). An event hook
with a ``run`` argument hears the :class:`~trade_core.runs.RunContext` it happens in (None outside a run),
filled in by ``notify``, so no call site passes it. Other packages
add their own specs through :func:`trade_addhooks` (``trade_data.hookspecs`` is one; :func:`adds_hookspecs`
implements it).

Implementations run last-registered-first (pluggy's LIFO); built-ins are loaded from
entry points like everyone else, so no hook here relies on ordering.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pluggy

if TYPE_CHECKING:
    import click

    from trade_core.runs import RunContext

F = TypeVar("F", bound=Callable[..., object])

PROJECT = "trade"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
EVENT = f"{PROJECT}_event"
"""The attribute :func:`eventspec` sets on a hookspec: what tells an event hook from a ``register`` hook."""
FAILS_CLOSED = f"{PROJECT}_fails_closed"
"""The attribute ``@eventspec(fails_closed=True)`` sets: a plugin that raises in the hook answers with its failure."""
RunKind = Literal["backtest", "tasks", "training"]


def eventspec(function: F | None = None, *, fails_closed: bool = False) -> Any:
    """A hookspec for an event: every plugin implementing it is called, alone, each time the event happens.

    The failure policy is the spec's: by default a plugin that raises is reported once and not called for the
    hook again (an observer's bug must not stop the run); ``@eventspec(fails_closed=True)`` makes its failure
    its answer, every time, and keeps asking it (a check that cannot run must not pass: a risk veto).
    """

    def mark(spec: F) -> F:
        setattr(spec, EVENT, True)
        setattr(spec, FAILS_CLOSED, fails_closed)
        return hookspec(spec)

    return mark if function is None else mark(function)


def adds_hookspecs(module: ModuleType) -> Callable[[pluggy.PluginManager], None]:
    """The ``trade_addhooks`` implementation of a package whose hookspecs are ``module``: the one body that
    every package's plugin needs (``trade_addhooks = adds_hookspecs(hookspecs)`` in its plugin module)."""

    @hookimpl
    def trade_addhooks(pluginmanager: pluggy.PluginManager) -> None:
        pluginmanager.add_hookspecs(module)

    return trade_addhooks


@hookspec(historic=True)
def trade_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications owned by a package (``pluginmanager.add_hookspecs(module)``).

    Historic: plugins registered later still see the call, so load order does not matter.
    Added in 0.1.
    """


@hookspec
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    """Register ``trade`` subcommands or subcommand groups (``register(click_group)``).

    The command's ``name`` is its registry key: two plugins registering ``data`` is an
    error naming both. Import heavy modules inside the command, not at plugin import,
    so ``trade --help`` and Ray workers stay fast. Added in 0.1.
    """


@eventspec
def trade_run_started(run: RunContext) -> None:
    """A run starts (``run.kind``: ``backtest``, ``tasks``, ``training``), before its first day, episode or step.

    Called in the process that runs it (``run.role == "parent"``), once per run (``--seeds K``: once per seed's
    folder); its workers' events carry the same ``run.run_id`` with ``role="worker"``. Set up per-run state here.
    Added in 0.1.
    """


@eventspec
def trade_run_finished(kind: RunKind, folder: Path | None, run: RunContext) -> None:
    """A run finished and its folder is complete: a backtest (``summary.json`` written), a tasks evaluation, or a
    training run that ended without an error (``kind``: ``backtest``, ``tasks``, ``training``).

    Called in the parent process, once per run (``--seeds K``: once per seed's folder), after everything its
    workers did; a run that fails does not finish. For reports, uploads and notifications; the folder is the
    run's, so write into it atomically or not at all. Added in 0.1.
    """
