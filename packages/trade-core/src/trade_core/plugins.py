"""The single plugin manager of trade-agent: loading entry points (collecting items: :mod:`trade_core.registry`).

Everything, built-ins included, arrives through the ``trade`` entry-point group, the way
tox and pytest load their own features. Loading is cheap and has no side effects, so it
is safe in every Ray worker.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import pluggy
import structlog

from trade_core import env, hookspecs, runs
from trade_core.errors import PluginError

ENTRY_POINT_GROUP = "trade"
ESSENTIAL_PLUGINS = frozenset({"core"})
"""Plugins that allow- and block-lists cannot remove: without them there is no CLI to report with."""

log = structlog.get_logger("trade.plugins")


@dataclass(frozen=True)
class PluginOrigin:
    """Where a plugin came from: its entry-point name and the distribution that declared it."""

    name: str
    dist: str
    version: str
    module: str


@dataclass(frozen=True)
class PluginFailure:
    """Why a plugin is skipped: it failed to load (``hook`` is None) or one of its register hooks raised."""

    origin: PluginOrigin
    hook: str | None
    cause: str

    def one_line(self) -> str:
        dist = f"{self.origin.dist} {self.origin.version}".strip()
        where = f"failed in {self.hook}" if self.hook else "failed to load"
        return f"plugin '{self.origin.name}' from {dist} {where}: {self.cause}"


@dataclass(eq=False)  # two managers are never equal: each holds its own plugins and collected items
class TradePluginManager:
    """pluggy's manager plus what trade-agent records about each plugin."""

    pm: pluggy.PluginManager
    origins: dict[str, PluginOrigin] = field(default_factory=dict)
    failures: list[PluginFailure] = field(default_factory=list)
    collected: dict[str, Any] = field(default_factory=dict)
    """Each registry's items by hook name (:class:`~trade_core.registry.Registry`); emptied when plugins change."""

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.pm.hook

    def register(self, plugin: object, name: str, origin: PluginOrigin | None = None) -> None:
        """Register ``plugin`` under ``name``; used by the loader and by tests for inline plugins."""
        self.pm.register(plugin, name=name)
        self.collected.clear()
        self.origins[name] = origin or PluginOrigin(
            name, dist="(inline)", version="", module=getattr(plugin, "__name__", type(plugin).__name__)
        )

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.collected.clear()
        self.origins.pop(name, None)

    def origin(self, plugin_name: str) -> PluginOrigin:
        return self.origins.get(plugin_name) or PluginOrigin(plugin_name, "(unknown)", "", "")

    def failed(self, plugin_name: str, hook: str | None) -> bool:
        return any((f.origin.name, f.hook) == (plugin_name, hook) for f in self.failures)

    def caller(self, spec: Callable[..., object]) -> pluggy.HookCaller:
        """The hook of the hookspec ``spec``; one that no loaded plugin defines (its package is disabled or failed
        to load) is a PluginError, never a hook without implementations that silently does nothing."""
        name = hook_name(spec)
        caller = getattr(self.hook, name, None)
        if caller is None or caller.spec is None:
            package = spec.__module__.split(".")[0]
            raise PluginError(
                f"no loaded plugin defines the hook {name} (from {package})",
                hint=f"`trade plugins` shows whether {package}'s plugin failed; check {env.DISABLE_PLUGINS}",
            )
        return caller

    def alone(self, spec: Callable[..., object]) -> Iterator[tuple[PluginOrigin, Callable[..., list[Any]]]]:
        """Each implementation of ``spec``'s hook as a caller of that plugin alone, with its origin, in the order
        pluggy calls them (``tryfirst`` first, then the last registered first); plugins that failed in the hook
        before are left out. Through pluggy, so ``TRADE_TRACE_PLUGINS=1`` sees each call."""
        caller = self.caller(spec)
        impls = caller.get_hookimpls()
        for impl in reversed(impls):  # pluggy keeps them in the reverse of its call order
            origin = self.origin(impl.plugin_name)
            if not self.failed(origin.name, caller.name):
                others = [i.plugin for i in impls if i is not impl]
                yield origin, self.pm.subset_hook_caller(caller.name, remove_plugins=others)

    def notify(self, spec: Callable[..., object], **kwargs: Any) -> list[tuple[PluginOrigin, Any]]:
        """Call the event hook ``spec`` (:func:`~trade_core.hookspecs.eventspec`) once per plugin: what each
        returned (None left out), by plugin, in pluggy's order. A plugin that raises is handled by the spec's
        failure policy: reported (:meth:`fail`) and not called for this hook again, or, for a hook that fails
        closed, logged and answered by its :class:`PluginFailure` (asked again next time). Under
        ``TRADE_STRICT_PLUGINS=1`` either raises a :class:`PluginError`, which ends the run."""
        if not getattr(spec, hookspecs.EVENT, False):
            raise TypeError(f"{spec.__name__} is not an event hook (@eventspec)")
        if "run" not in kwargs and "run" in self.caller(spec).spec.argnames:
            kwargs["run"] = runs.current()
        answers: list[tuple[PluginOrigin, Any]] = []
        for origin, alone in self.alone(spec):
            with plugin_code() as caught:
                answers += [(origin, answer) for answer in alone(**kwargs)]
            if caught.error is None:
                continue
            if not getattr(spec, hookspecs.FAILS_CLOSED, False):
                self.fail(origin, caught.error, spec.__name__)
                continue
            failure = _failure(origin, caught.error, spec.__name__)
            if os.environ.get(env.STRICT_PLUGINS) == "1":
                raise PluginError(failure.one_line(), hint=_strict_hint(origin)) from caught.error
            log.error(failure.one_line())
            answers.append((origin, failure))
        return answers

    def fail(self, origin: PluginOrigin, error: BaseException, hook: str | None = None) -> None:
        """Record a broken plugin and log one line naming it; under ``TRADE_STRICT_PLUGINS=1`` raise instead."""
        failure = _failure(origin, error, hook)
        if os.environ.get(env.STRICT_PLUGINS) == "1":
            raise PluginError(failure.one_line(), hint=_strict_hint(origin)) from error
        self.failures.append(failure)
        log.error(failure.one_line())


def _failure(origin: PluginOrigin, error: BaseException, hook: str | None) -> PluginFailure:
    return PluginFailure(origin, hook, " ".join(f"{type(error).__name__}: {error}".split()))


def _strict_hint(origin: PluginOrigin) -> str:
    return f"uninstall {origin.dist} or unset {env.STRICT_PLUGINS}"


def hook_name(spec: Callable[..., object]) -> str:
    """The name of the hook ``spec`` specifies; anything but a ``trade`` hookspec is a TypeError."""
    if getattr(spec, f"{hookspecs.PROJECT}_spec", None) is None:
        raise TypeError(f"{spec!r} is not a trade hookspec (@hookspec)")
    return spec.__name__


@dataclass
class Caught:
    """What plugin code run under :func:`plugin_code` raised, if anything."""

    error: BaseException | None = None


@contextmanager
def plugin_code() -> Iterator[Caught]:
    """Run a plugin's code so that whatever it raises is caught as its failure, not the end of the process.

    That includes ``sys.exit`` and a KeyboardInterrupt the plugin raises itself; the user's Ctrl-C still
    interrupts. The SIGINT handler in place (Python's, or a command's own) is wrapped meanwhile, so a Ctrl-C is
    counted before it is handled as before, and the two are told apart.
    """
    caught = Caught()
    sigints: list[int] = []
    main = threading.current_thread() is threading.main_thread()  # the only thread a Ctrl-C reaches
    previous = signal.getsignal(signal.SIGINT) if main else None

    def counted(signum: int, frame: FrameType | None) -> None:
        sigints.append(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.default_int_handler(signum, frame)

    if main:
        signal.signal(signal.SIGINT, counted)
    try:
        yield caught
    except (Exception, SystemExit, KeyboardInterrupt) as error:
        if isinstance(error, KeyboardInterrupt) and sigints:
            raise
        caught.error = error
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _pluggy() -> pluggy.PluginManager:
    """A pluggy manager with the core hookspecs and no plugins."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if os.environ.get(env.TRACE_PLUGINS) == "1":
        pm.add_hookcall_monitoring(
            before=lambda name, impls, kwargs: log.info("hook.call", hook=name, plugins=[i.plugin_name for i in impls]),
            after=lambda outcome, name, impls, kwargs: log.info("hook.done", hook=name),
        )
    pm.hook.trade_addhooks.call_historic(kwargs={"pluginmanager": pm})
    return pm


def new_manager() -> TradePluginManager:
    """A manager with the core hookspecs and no plugins: tests start from this."""
    return TradePluginManager(_pluggy())


def listed_plugins(variable: str) -> set[str] | None:
    """The plugin names an allow- or block-list variable gives (None when it is unset)."""
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _distribution(ep: md.EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    return (dist.metadata["Name"], dist.version) if dist is not None else ("(unknown)", "")


def load_entry_points(manager: TradePluginManager, entry_points: Iterable[md.EntryPoint] | None = None) -> None:
    """Load the ``trade`` entry points, honouring the allow-list, block-list and strict mode.

    A plugin that fails to import (``sys.exit`` included) or that pluggy refuses is skipped with
    one logged line naming it, its distribution and the cause (fatal under ``TRADE_STRICT_PLUGINS=1``).
    """
    allowed = listed_plugins(env.LOAD_PLUGINS)
    blocked = (listed_plugins(env.DISABLE_PLUGINS) or set()) - ESSENTIAL_PLUGINS
    if entry_points is None:
        entry_points = md.entry_points(group=ENTRY_POINT_GROUP)
    imported: list[tuple[object, PluginOrigin]] = []
    for ep in sorted(entry_points, key=lambda e: e.name):
        if ep.name in manager.origins:
            continue
        if ep.name not in ESSENTIAL_PLUGINS and (
            ep.name in blocked or (allowed is not None and ep.name not in allowed)
        ):
            continue
        origin = PluginOrigin(ep.name, *_distribution(ep), ep.value)
        with plugin_code() as caught:
            imported.append((ep.load(), origin))
        if caught.error is not None:
            manager.fail(origin, caught.error)
    _register_all(manager, imported)


def _register_all(manager: TradePluginManager, plugins: list[tuple[object, PluginOrigin]]) -> None:
    """Register ``plugins`` (after those already registered); one that pluggy refuses is skipped.

    pluggy checks a plugin's hooks when it registers and again when a later plugin adds their
    hookspecs (``trade_addhooks``), so a refusal may name an earlier plugin and leave pluggy
    half-changed: each attempt therefore starts from a fresh pluggy manager, without the culprits.
    """
    plugins = [*((manager.pm.get_plugin(name), origin) for name, origin in manager.origins.items()), *plugins]
    while True:
        manager.pm, manager.origins = _pluggy(), {}
        refused = _refusal(manager, plugins)
        if refused is None:
            return
        culprit, error = refused
        manager.fail(next(origin for plugin, origin in plugins if plugin is culprit), error)
        plugins = [(plugin, origin) for plugin, origin in plugins if plugin is not culprit]


def _refusal(
    manager: TradePluginManager, plugins: list[tuple[object, PluginOrigin]]
) -> tuple[object, BaseException] | None:
    """Register ``plugins`` until pluggy refuses one: that plugin and why, or None when all are in."""
    for plugin, origin in plugins:
        with plugin_code() as caught:  # its trade_addhooks may raise, or the module be registered already
            manager.register(plugin, origin.name, origin)
        if isinstance(caught.error, pluggy.PluginValidationError):
            return caught.error.plugin, caught.error
        if caught.error is not None:
            return plugin, caught.error
    try:
        manager.pm.check_pending()
    except pluggy.PluginValidationError as exc:  # a hook no loaded plugin defines
        return exc.plugin, exc
    return None


@functools.cache
def get_manager() -> TradePluginManager:
    """The process-wide manager with all permitted entry points loaded (once per process)."""
    manager = new_manager()
    load_entry_points(manager)
    return manager
