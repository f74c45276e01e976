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
from trade_core.plugins import PluginOrigin, TradePluginManager, get_manager

T = TypeVar("T")


@dataclass(frozen=True)
class Provided(Generic[T]):
    """One named item a plugin registered, with the plugin that supplied it."""

    name: str
    item: T
    origin: PluginOrigin


@dataclass(frozen=True)
class Registry(Generic[T]):
    """The items of one ``register`` hook: ``kind`` names them in errors, ``item_type`` is checked on collection."""

    hook: str
    kind: str
    item_type: type[T]

    def provided(self, manager: TradePluginManager | None = None) -> dict[str, Provided[T]]:
        """Every item by name with its plugin (the process-wide manager unless one is given)."""
        manager = manager or get_manager()
        if self.hook not in manager.collected:
            manager.collected[self.hook] = collect(manager, self.hook, self.kind, expect=self.item_type)
        return manager.collected[self.hook]

    def all(self, manager: TradePluginManager | None = None) -> dict[str, T]:
        """Every item by name, in the order the plugins registered them."""
        return {name: provided.item for name, provided in self.provided(manager).items()}

    def get(self, name: str, manager: TradePluginManager | None = None) -> T:
        """The item registered as ``name``; an unknown name is a :class:`TradeError` listing the valid ones."""
        items = self.all(manager)
        if name not in items:
            raise TradeError(f"unknown {self.kind} '{name}'", hint=f"valid: {', '.join(sorted(items))}")
        return items[name]


def collect(
    manager: TradePluginManager, hook_name: str, kind: str, expect: type | None = None
) -> dict[str, Provided[Any]]:
    """Call a ``register``-style hook once per plugin, through pluggy, and return the items by name.

    Each plugin's implementation is called alone (``subset_hook_caller``) with its own ``register``, so
    every item is attributed to the plugin that supplied it and ``TRADE_TRACE_PLUGINS=1`` traces each call.
    An implementation that raises, or registers an item that is not an ``expect`` (when given), is
    reported through :meth:`TradePluginManager.fail` and none of its items are used, in this call or
    later ones: a half-registered plugin never is. Two plugins registering the same name raise a
    :class:`PluginError` naming both distributions.
    """
    caller = getattr(manager.hook, hook_name, None)
    if caller is None:  # no plugin defines or implements the hook (its package is disabled)
        return {}
    impls = caller.get_hookimpls()
    found: dict[str, Provided[Any]] = {}
    for impl in impls:
        origin = manager.origin(impl.plugin_name)
        if manager.failed(origin.name, hook_name):  # skipped for good: reported once, never half-used
            continue
        alone = manager.pm.subset_hook_caller(hook_name, remove_plugins=[i.plugin for i in impls if i is not impl])
        items: list[Any] = []
        try:
            alone(register=items.append)
            named = [(_checked(item, expect).name, item) for item in items]
        except Exception as exc:  # one broken plugin must not take the CLI down
            manager.fail(origin, exc, hook_name)
            continue
        for name, item in named:
            if name in found:
                first = found[name].origin
                raise PluginError(
                    f"{kind} '{name}' is registered twice: by plugin '{first.name}' ({first.dist}) "
                    f"and by plugin '{origin.name}' ({origin.dist})",
                    hint=f"uninstall one of them or disable it with {env.DISABLE_PLUGINS}",
                )
            found[name] = Provided(name, item, origin)
    return found


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
