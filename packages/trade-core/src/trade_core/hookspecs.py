"""The hooks every trade-agent host understands.

Hooks that contribute named things take a ``register`` callback instead of returning
values, so the registry knows which plugin supplied each item and can refuse duplicate
names (see :mod:`trade_core.registry`). Other packages add their own specs
through :func:`trade_addhooks` (``trade_data.hookspecs`` is one).

Implementations run last-registered-first (pluggy's LIFO); built-ins are loaded from
entry points like everyone else, so no hook here relies on ordering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

PROJECT = "trade"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


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
