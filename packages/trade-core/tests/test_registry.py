"""One registry for every kind of named item: lookups, errors, caching, item types, tracing (trade-core only)."""

from __future__ import annotations

import sys

import click
import pytest
import structlog

from trade_core import hookimpl, hookspecs
from trade_core.cli import LazyGroup
from trade_core.errors import PluginError, TradeError
from trade_core.plugins import TradePluginManager, new_manager
from trade_core.registry import Registry
from trade_core.testing import inline_plugin

COMMANDS = Registry(hookspecs.trade_register_commands, "command", click.Command)


class Registers:
    """An inline plugin registering ``items`` through the core commands hook."""

    def __init__(self, *items: object) -> None:
        self.items = items

    @hookimpl
    def trade_register_commands(self, register):  # type: ignore[no-untyped-def]
        for item in self.items:
            register(item)


def test_get_and_all_look_items_up_by_name(plugin_manager: TradePluginManager) -> None:
    first, second = click.Command("first"), click.Command("second")
    with inline_plugin(plugin_manager, Registers(first, second), "two"):
        assert COMMANDS.all(plugin_manager) == {"first": first, "second": second}
        assert COMMANDS.get("second", plugin_manager) is second
        assert COMMANDS.provided(plugin_manager)["first"].origin.name == "two"
        with pytest.raises(TradeError) as error:
            COMMANDS.get("third", plugin_manager)
    assert error.value.one_line() == "unknown command 'third' (valid: first, second)"


def test_items_are_collected_once_and_again_after_a_plugin_comes_or_goes(plugin_manager: TradePluginManager) -> None:
    calls = []

    class Counting(Registers):
        @hookimpl
        def trade_register_commands(self, register):  # type: ignore[no-untyped-def]
            calls.append(1)
            super().trade_register_commands(register)

    with inline_plugin(plugin_manager, Counting(click.Command("a")), "a"):
        assert list(COMMANDS.all(plugin_manager)) == ["a"]
        assert list(COMMANDS.all(plugin_manager)) == ["a"] and len(calls) == 1  # cached per manager
        with inline_plugin(plugin_manager, Registers(click.Command("b")), "b"):
            assert list(COMMANDS.all(plugin_manager)) == ["a", "b"]  # no cache to clear by hand
        assert list(COMMANDS.all(plugin_manager)) == ["a"] and len(calls) == 3
    assert COMMANDS.all(new_manager()) == {}  # each manager has its own items


def test_an_item_of_the_wrong_type_fails_its_plugin_only(plugin_manager: TradePluginManager) -> None:
    good = click.Command("good")
    with (
        inline_plugin(plugin_manager, Registers(good), "good"),
        inline_plugin(plugin_manager, Registers(click.Command("half"), click.Command), "class-not-instance"),
        structlog.testing.capture_logs() as logs,
    ):
        assert COMMANDS.all(plugin_manager) == {"good": good}
    assert [log["event"] for log in logs] == [
        "plugin 'class-not-instance' from (inline) failed in trade_register_commands: "
        "TypeError: registered the class Command, not a Command"
    ]


def test_register_hooks_are_called_through_pluggy_so_tracing_sees_each_plugin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRADE_TRACE_PLUGINS", "1")
    manager = new_manager()
    with (
        inline_plugin(manager, Registers(click.Command("a")), "first"),
        inline_plugin(manager, Registers(click.Command("b")), "second"),
        structlog.testing.capture_logs() as logs,
    ):
        COMMANDS.all(manager)
    calls = [(log["hook"], log["plugins"]) for log in logs if log["event"] == "hook.call"]
    assert calls == [("trade_register_commands", ["first"]), ("trade_register_commands", ["second"])]


class Specs:
    """Hookspecs of a package that the manager under test never loads."""

    @staticmethod
    @hookspecs.hookspec
    def trade_register_things(register):  # type: ignore[no-untyped-def]
        """Register things."""

    @staticmethod
    @hookspecs.hookspec
    def trade_things(things):  # type: ignore[no-untyped-def]
        """Not a register hook."""


def test_a_registry_of_a_hook_no_loaded_plugin_defines_is_an_error_not_empty(
    plugin_manager: TradePluginManager,
) -> None:
    things = Registry(Specs.trade_register_things, "thing", object)
    with pytest.raises(PluginError) as error:
        things.all(plugin_manager)
    package = __name__.split(".")[0]  # where the spec lives: this test module here, a package's name in use
    assert error.value.one_line() == (
        f"no loaded plugin defines the hook trade_register_things (from {package}) "
        f"(`trade plugins` shows whether {package}'s plugin failed; check TRADE_DISABLE_PLUGINS)"
    )
    plugin_manager.pm.add_hookspecs(Specs)
    assert things.all(plugin_manager) == {}  # defined, and nobody registers a thing: empty, rightly


def test_a_registry_takes_a_register_hookspec_not_a_name() -> None:
    with pytest.raises(TypeError, match=r"^'trade_register_commands' is not a trade hookspec"):
        Registry("trade_register_commands", "command", click.Command)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^trade_things is not a register hook"):
        Registry(Specs.trade_things, "thing", object)


def test_lazy_group_imports_a_subcommand_only_when_it_is_used() -> None:
    heavy = "colorsys"  # stands in for a subcommand's module: small, pure, imported by nothing else
    group = LazyGroup("g", lazy={"lazy": f"{heavy}:rgb_to_hsv"}, commands=[click.Command("eager")])
    ctx = click.Context(group)
    sys.modules.pop(heavy, None)
    assert group.list_commands(ctx) == ["eager", "lazy"]
    assert heavy not in sys.modules
    assert group.get_command(ctx, "lazy") is sys.modules[heavy].rgb_to_hsv
    assert group.get_command(ctx, "eager").name == "eager"  # type: ignore[union-attr]
