"""Named items that plugins register: one :class:`Registry` per ``register`` hook, the same for every kind.

Each package declares its registries in one line, beside the item type, and looks items up through them::

    TOOLS = Registry("trade_register_tools", "tool", Tool)
    TOOLS.get("GetPriceData")  # unknown names: one line listing the valid ones
    TOOLS.all()

Items are collected once per plugin manager and collected again after a plugin is registered or
unregistered there (see :class:`~trade_core.plugins.TradePluginManager`), so tests need no cache resets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from trade_core import env
from trade_core.errors import PluginError, TradeError
from trade_core.plugins import PluginOrigin, TradePluginManager, get_manager, plugin_code

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
    """The items of one ``register`` hook: ``kind`` names them in errors, ``item_type`` is checked on collection."""

    hook: str
    kind: str
    item_type: type[T]

    def collected(self, manager: TradePluginManager | None = None) -> Collected[T]:
        """The items and clashes, without refusing: for diagnostics (the process-wide manager unless one is given)."""
        manager = manager or get_manager()
        if self.hook not in manager.collected:
            manager.collected[self.hook] = collect(manager, self.hook, expect=self.item_type)
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


def collect(manager: TradePluginManager, hook_name: str, expect: type | None = None) -> Collected[Any]:
    """Call a ``register``-style hook once per plugin, through pluggy: the items by name, and the clashes.

    Each plugin's implementation is called alone (``subset_hook_caller``) with its own ``register``, so
    every item is attributed to the plugin that supplied it and ``TRADE_TRACE_PLUGINS=1`` traces each call.
    An implementation that raises (``sys.exit`` included: :func:`~trade_core.plugins.plugin_code`), or
    registers an item that is not an ``expect`` (when given), is reported through
    :meth:`TradePluginManager.fail` and none of its items are used, in this call or later ones: a
    half-registered plugin never is. A name two plugins register is a :class:`Clash`, and neither item is used.
    """
    caller = getattr(manager.hook, hook_name, None)
    if caller is None:  # no plugin defines or implements the hook (its package is disabled)
        return Collected({}, [])
    impls = caller.get_hookimpls()
    first: dict[str, Provided[Any]] = {}
    clashes: list[Clash] = []
    for impl in impls:
        origin = manager.origin(impl.plugin_name)
        if manager.failed(origin.name, hook_name):  # skipped for good: reported once, never half-used
            continue
        alone = manager.pm.subset_hook_caller(hook_name, remove_plugins=[i.plugin for i in impls if i is not impl])
        items: list[Any] = []
        with plugin_code() as caught:
            alone(register=items.append)
            named = [(_checked(item, expect).name, item) for item in items]
        if caught.error is not None:
            manager.fail(origin, caught.error, hook_name)
            continue
        for name, item in named:
            provided = Provided(name, item, origin)
            if name in first:
                clashes.append(Clash(hook_name, first[name], provided))
            else:
                first[name] = provided
    clashing = {clash.name for clash in clashes}
    return Collected({name: p for name, p in first.items() if name not in clashing}, clashes)


def _checked(item: T, expect: type | None) -> T:
    if expect is not None and not isinstance(item, expect):
        what = f"the class {item.__name__}" if isinstance(item, type) else f"a {type(item).__name__}"
        raise TypeError(f"registered {what}, not a {expect.__name__}")
    return item


def register_hooks(manager: TradePluginManager) -> list[str]:
    """Names of every hook whose only argument is ``register`` (the collection hooks)."""
    names = []
    for name in sorted(dir(manager.hook)):
        caller = getattr(manager.hook, name)
        spec = getattr(caller, "spec", None)
        if spec is not None and tuple(spec.argnames) == ("register",):
            names.append(name)
    return names
