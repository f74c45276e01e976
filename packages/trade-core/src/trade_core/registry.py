"""Named items that plugins register: one :class:`Registry` per ``register`` hook, the same for every kind.

Each package declares its registries in one line, beside the item type, and looks items up through them::

    TOOLS = Registry(hookspecs.trade_register_tools, "tool", Tool)
    TOOLS.get("GetPriceData")  # unknown names: one line listing the valid ones
    TOOLS.all()

Items are collected once per plugin manager and collected again after a plugin is registered or
unregistered there (see :class:`~trade_core.plugins.TradePluginManager`), so tests need no cache resets.
A registry names its hook by the hookspec itself: a misspelt hook is an AttributeError at import, and a hook
no loaded plugin defines is a PluginError when the registry is read, never an empty registry.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from trade_core import env
from trade_core.errors import PluginError, TradeError
from trade_core.hookspecs import EVENT
from trade_core.plugins import PluginOrigin, TradePluginManager, get_manager, hook_name, plugin_code

T = TypeVar("T")


@dataclass(frozen=True)
class Provided(Generic[T]):
    """One named item a plugin registered, with the plugin that supplied it."""

    name: str
    item: T
    origin: PluginOrigin


@dataclass(frozen=True)
class Clash:
    """A name that two plugins registered: the registry uses neither, so no command depends on load order."""

    hook: str
    first: Provided[Any]
    second: Provided[Any]

    @property
    def name(self) -> str:
        return self.first.name

    def line(self) -> str:
        a, b = self.first.origin, self.second.origin
        return f"'{self.name}' is registered twice: by plugin '{a.name}' ({a.dist}) and by plugin '{b.name}' ({b.dist})"

    def error(self, kind: str) -> PluginError:
        """What a command that needs the registry fails with, naming both distributions."""
        hint = f"uninstall one of them or disable it with {env.DISABLE_PLUGINS}"
        return PluginError(f"{kind} {self.line()}", hint=hint)


@dataclass(frozen=True)
class Collected(Generic[T]):
    """What the plugins registered through one hook: the usable items by name, and the names that clash."""

    items: dict[str, Provided[T]]
    clashes: list[Clash]


@dataclass(frozen=True)
class Registry(Generic[T]):
    """The items of one ``register`` hook (its hookspec, ``spec``): ``kind`` names them in errors, ``item_type``
    is checked on collection."""

    spec: Callable[..., None]
    kind: str
    item_type: type[T]

    def __post_init__(self) -> None:
        name = hook_name(self.spec)  # what is no hookspec: a TypeError now, at import, not an empty registry later
        if list(inspect.signature(self.spec).parameters) != ["register"]:
            raise TypeError(f"{name} is not a register hook: its one argument must be `register`")

    @property
    def hook(self) -> str:
        return hook_name(self.spec)

    def collected(self, manager: TradePluginManager | None = None) -> Collected[T]:
        """The items and clashes, without refusing: for diagnostics (the process-wide manager unless one is given)."""
        manager = manager or get_manager()
        if self.hook not in manager.collected:
            manager.collected[self.hook] = collect(manager, self.spec, expect=self.item_type)
        return manager.collected[self.hook]

    def provided(self, manager: TradePluginManager | None = None) -> dict[str, Provided[T]]:
        """Every item by name with its plugin; a name two plugins registered is a :class:`PluginError` naming both."""
        collected = self.collected(manager)
        if collected.clashes:
            raise collected.clashes[0].error(self.kind)
        return collected.items

    def all(self, manager: TradePluginManager | None = None) -> dict[str, T]:
        """Every item by name, in the order the plugins registered them."""
        return {name: provided.item for name, provided in self.provided(manager).items()}

    def get(self, name: str, manager: TradePluginManager | None = None) -> T:
        """The item registered as ``name``; an unknown name is a :class:`TradeError` listing the valid ones."""
        items = self.all(manager)
        if name not in items:
            raise TradeError(f"unknown {self.kind} '{name}'", hint=f"valid: {', '.join(sorted(items))}")
        return items[name]


def collect(manager: TradePluginManager, spec: Callable[..., None], expect: type | None = None) -> Collected[Any]:
    """Call the ``register``-style hook ``spec`` once per plugin, through pluggy: the items by name, and the clashes.

    Each plugin's implementation is called alone (:meth:`TradePluginManager.alone`) with its own ``register``,
    so every item is attributed to the plugin that supplied it and ``TRADE_TRACE_PLUGINS=1`` traces each call.
    An implementation that raises (``sys.exit`` included: :func:`~trade_core.plugins.plugin_code`), or
    registers an item that is not an ``expect`` (when given), is reported through
    :meth:`TradePluginManager.fail` and none of its items are used, in this call or later ones: a
    half-registered plugin never is. A name two plugins register is a :class:`Clash`, and neither item is used.
    """
    hook = hook_name(spec)
    first: dict[str, Provided[Any]] = {}
    clashes: list[Clash] = []
    registered = {name: rank for rank, name in enumerate(manager.origins)}
    callers = sorted(manager.alone(spec), key=lambda pair: registered.get(pair[0].name, len(registered)))
    for origin, alone in callers:  # in registration order; one failed in the hook is skipped for good
        items: list[Any] = []
        with plugin_code() as caught:
            alone(register=items.append)
            named = [(_checked(item, expect).name, item) for item in items]
        if caught.error is not None:
            manager.fail(origin, caught.error, hook)
            continue
        for name, item in named:
            provided = Provided(name, item, origin)
            if name in first:
                clashes.append(Clash(hook, first[name], provided))
            else:
                first[name] = provided
    clashing = {clash.name for clash in clashes}
    return Collected({name: p for name, p in first.items() if name not in clashing}, clashes)


def _checked(item: T, expect: type | None) -> T:
    if expect is not None and not isinstance(item, expect):
        what = f"the class {item.__name__}" if isinstance(item, type) else f"a {type(item).__name__}"
        raise TypeError(f"registered {what}, not a {expect.__name__}")
    return item


def register_hooks(manager: TradePluginManager) -> list[Callable[..., None]]:
    """The hookspec of every hook whose only argument is ``register`` (the collection hooks), by name."""
    return [spec.function for spec in _specs(manager) if tuple(spec.argnames) == ("register",)]


def event_hooks(manager: TradePluginManager) -> list[Callable[..., None]]:
    """The hookspec of every event hook (:func:`~trade_core.hookspecs.eventspec`), by name."""
    return [spec.function for spec in _specs(manager) if getattr(spec.function, EVENT, False)]


def _specs(manager: TradePluginManager) -> list[Any]:
    callers = [getattr(manager.hook, name) for name in sorted(dir(manager.hook))]
    return [caller.spec for caller in callers if getattr(caller, "spec", None) is not None]
