"""The single plugin manager of trade-agent: loading entry points and collecting named items.

Everything, built-ins included, arrives through the ``trade`` entry-point group, the way
tox and pytest load their own features. Loading is cheap and has no side effects, so it
is safe in every Ray worker.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy
import structlog

from trade_core import env, hookspecs
from trade_core.errors import PluginError

ENTRY_POINT_GROUP = "trade"
ESSENTIAL_PLUGINS = frozenset({"core"})
"""Plugins that allow- and block-lists cannot remove: without them there is no CLI to report with."""

log = structlog.get_logger("trade.plugins")
T = TypeVar("T")


@dataclass(frozen=True)
class PluginOrigin:
    """Where a plugin came from: its entry-point name and the distribution that declared it."""

    name: str
    dist: str
    version: str
    module: str


@dataclass(frozen=True)
class LoadFailure:
    name: str
    dist: str
    cause: str

    def one_line(self) -> str:
        return f"plugin '{self.name}' from {self.dist} failed to load: {self.cause}"


@dataclass(eq=False)  # identity-hashed, so per-manager caches can key on it
class TradePluginManager:
    """pluggy's manager plus what trade-agent records about each plugin."""

    pm: pluggy.PluginManager
    origins: dict[str, PluginOrigin] = field(default_factory=dict)
    failures: list[LoadFailure] = field(default_factory=list)

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.pm.hook

    def register(self, plugin: object, name: str, origin: PluginOrigin | None = None) -> None:
        """Register ``plugin`` under ``name``; used by the loader and by tests for inline plugins."""
        self.pm.register(plugin, name=name)
        self.origins[name] = origin or PluginOrigin(
            name, dist="(inline)", version="", module=getattr(plugin, "__name__", type(plugin).__name__)
        )

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.origins.pop(name, None)

    def origin(self, plugin_name: str) -> PluginOrigin:
        return self.origins.get(plugin_name) or PluginOrigin(plugin_name, "(unknown)", "", "")


def new_manager() -> TradePluginManager:
    """A manager with the core hookspecs and no plugins: tests start from this."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if os.environ.get(env.TRACE_PLUGINS) == "1":
        pm.add_hookcall_monitoring(
            before=lambda name, impls, kwargs: log.info("hook.call", hook=name, plugins=[i.plugin_name for i in impls]),
            after=lambda outcome, name, impls, kwargs: log.info("hook.done", hook=name),
        )
    manager = TradePluginManager(pm)
    pm.hook.trade_addhooks.call_historic(kwargs={"pluginmanager": pm})
    return manager


def _names(variable: str) -> set[str] | None:
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _distribution(ep: md.EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    return (dist.metadata["Name"], dist.version) if dist is not None else ("(unknown)", "")


def load_entry_points(manager: TradePluginManager, entry_points: Iterable[md.EntryPoint] | None = None) -> None:
    """Load the ``trade`` entry points, honouring the allow-list, block-list and strict mode.

    A plugin that fails to import is skipped with one logged line naming it, its
    distribution and the cause (fatal under ``TRADE_STRICT_PLUGINS=1``).
    """
    allowed = _names(env.LOAD_PLUGINS)
    blocked = (_names(env.DISABLE_PLUGINS) or set()) - ESSENTIAL_PLUGINS
    strict = os.environ.get(env.STRICT_PLUGINS) == "1"
    if entry_points is None:
        entry_points = md.entry_points(group=ENTRY_POINT_GROUP)
    for ep in sorted(entry_points, key=lambda e: e.name):
        if ep.name in manager.origins:
            continue
        if ep.name not in ESSENTIAL_PLUGINS and (
            ep.name in blocked or (allowed is not None and ep.name not in allowed)
        ):
            continue
        dist, version = _distribution(ep)
        try:
            plugin = ep.load()
        except Exception as exc:  # a broken third-party plugin must not take the CLI down
            failure = LoadFailure(ep.name, f"{dist} {version}".strip(), f"{type(exc).__name__}: {exc}")
            if strict:
                raise PluginError(failure.one_line(), hint=f"uninstall {dist} or unset {env.STRICT_PLUGINS}") from exc
            manager.failures.append(failure)
            log.error(failure.one_line())
            continue
        manager.register(plugin, ep.name, PluginOrigin(ep.name, dist, version, ep.value))
    try:
        manager.pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            f"plugin '{exc.plugin_name}' implements a hook no loaded plugin defines: {exc}",
            hint="mark hooks of optional hosts @hookimpl(optionalhook=True)",
        ) from None


@functools.cache
def get_manager() -> TradePluginManager:
    """The process-wide manager with all permitted entry points loaded (once per process)."""
    manager = new_manager()
    load_entry_points(manager)
    return manager


@dataclass(frozen=True)
class Provided(Generic[T]):
    """One named item a plugin registered, with the plugin that supplied it."""

    name: str
    item: T
    origin: PluginOrigin


def collect(
    manager: TradePluginManager,
    hook_name: str,
    kind: str,
    name_of: Callable[[Any], str] = lambda item: item.name,
) -> dict[str, Provided[Any]]:
    """Call a ``register``-style hook once per plugin and return the items by name.

    Each implementation is called with its own ``register`` so every item is attributed
    to the plugin that supplied it. Two plugins registering the same name raise a
    :class:`PluginError` naming both distributions.
    """
    found: dict[str, Provided[Any]] = {}
    caller = getattr(manager.hook, hook_name)
    for impl in caller.get_hookimpls():
        origin = manager.origin(impl.plugin_name)

        def register(item: Any, origin: PluginOrigin = origin) -> None:
            name = name_of(item)
            if name in found:
                first = found[name].origin
                raise PluginError(
                    f"{kind} '{name}' is registered twice: by plugin '{first.name}' ({first.dist}) "
                    f"and by plugin '{origin.name}' ({origin.dist})",
                    hint=f"uninstall one of them or disable it with {env.DISABLE_PLUGINS}",
                )
            found[name] = Provided(name, item, origin)

        impl.function(register=register)
    return found


def register_hooks(manager: TradePluginManager) -> list[str]:
    """Names of every hook whose only argument is ``register`` (the collection hooks)."""
    names = []
    for name in sorted(dir(manager.hook)):
        caller = getattr(manager.hook, name)
        spec = getattr(caller, "spec", None)
        if spec is not None and tuple(spec.argnames) == ("register",):
            names.append(name)
    return names
