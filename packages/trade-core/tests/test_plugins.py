"""The plugin registry: built-ins through entry points, third-party plugins, clashes, broken plugins."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from unittest.mock import ANY

import click
import pytest

from trade_core import hookimpl, hookspecs
from trade_core.errors import PluginError
from trade_core.hookspecs import EVENT, hookspec
from trade_core.plugins import TradePluginManager, get_manager
from trade_core.registry import Registry
from trade_core.testing import imports_of, inline_plugin, run_trade


def _with(site: Path, *names: str, **env: str) -> dict[str, str]:
    path = os.pathsep.join(str(site / n) for n in names)
    return {"PYTHONPATH": path, **env}


def test_builtins_are_listed_with_their_distributions() -> None:
    run = run_trade("plugins", "--json")
    assert run.code == 0, run.err
    plugins = {p["name"]: p for p in json.loads(run.out)["plugins"]}
    assert plugins["core"]["distribution"] == "trade-core"
    assert plugins["core"]["hooks"]["trade_register_commands"] == ["plugins"]
    assert {p["status"] for p in plugins.values()} == {"ok"}


def test_the_root_help_imports_no_numpy_or_pandas(tmp_path: Path) -> None:
    """Every installed plugin's commands hook runs for ``trade --help``: none may import the heavy stack."""
    assert imports_of("--help", tmp_path=tmp_path) & {"numpy", "pandas"} == set()


def test_text_listing_names_each_plugin_and_hook() -> None:
    run = run_trade("plugins")
    assert run.code == 0, run.err
    assert "core  (trade-core" in run.out
    assert "trade_register_commands: plugins" in run.out


def test_third_party_plugin_is_listed_and_its_command_runs(installed_plugins: Path) -> None:
    env = _with(installed_plugins, "trade-plugin-hello")
    listing = json.loads(run_trade("plugins", "--json", env=env).out)
    hello = next(p for p in listing["plugins"] if p["name"] == "hello")
    assert (hello["distribution"], hello["version"]) == ("trade-plugin-hello", "0.3.0")
    assert hello["hooks"] == {"trade_register_commands": ["hello"]}
    run = run_trade("hello", "--name", "A-shares", env=env)
    assert (run.code, run.out) == (0, "hello A-shares from a plugin\n")
    assert "trade-plugin-hello-0.3.0" in run_trade("--version", env=env).out


def test_a_command_name_two_plugins_register_is_listed_and_refused_naming_both(installed_plugins: Path) -> None:
    env = _with(installed_plugins, "trade-plugin-hello", "trade-plugin-clash")
    clash = (
        "'hello' is registered twice: by plugin 'clash' (trade-plugin-clash) and by plugin 'hello' (trade-plugin-hello)"
    )
    for args in (["hello"], ["hello", "--name", "x"], ["hello", "--help"]):
        run = run_trade(*args, env=env)
        assert (run.code, run.out) == (2, "")
        assert run.err == f"error: command {clash} (uninstall one of them or disable it with TRADE_DISABLE_PLUGINS)\n"
    listing = run_trade("plugins", "--json", env=env)
    assert listing.code == 0 and listing.err == ""
    rows = {p["name"]: p for p in json.loads(listing.out)["plugins"]}
    for name in ("clash", "hello"):
        assert (rows[name]["status"], rows[name]["hooks"]) == ("conflict", {"trade_register_commands": ["hello"]})
        assert rows[name]["conflicts"] == [{"hook": "trade_register_commands", "cause": clash}]
    help_ = run_trade("--help", env=env)
    assert help_.code == 0 and help_.err == ""
    assert "  hello       REFUSED: registered by two plugins (trade-plugin-clash and" in help_.out
    assert "  plugins     List installed plugins" in help_.out


def test_a_plugin_that_fails_to_import_is_one_line_and_skipped(installed_plugins: Path) -> None:
    run = run_trade("plugins", "--json", env=_with(installed_plugins, "trade-plugin-broken", TRADE_LOG_JSON="1"))
    assert run.code == 0
    assert "Traceback" not in run.err
    [line] = run.err.strip().splitlines()
    event = json.loads(line)
    assert event["level"] == "error"
    assert event["event"] == (
        "plugin 'broken' from trade-plugin-broken 0.1.0 failed to load: "
        "ModuleNotFoundError: No module named 'trade_plugin_missing_dependency'"
    )
    status = {p["name"]: p["status"] for p in json.loads(run.out)["plugins"]}
    assert (status["broken"], status["core"]) == ("failed", "ok")


def test_strict_mode_makes_a_broken_plugin_fatal(installed_plugins: Path) -> None:
    run = run_trade("plugins", env=_with(installed_plugins, "trade-plugin-broken", TRADE_STRICT_PLUGINS="1"))
    assert run.code == 2
    [line] = run.err.strip().splitlines()
    assert line.startswith("error: plugin 'broken' from trade-plugin-broken 0.1.0 failed to load")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TRADE_LOAD_PLUGINS": "hello"}, {"core", "hello"}),
        ({"TRADE_LOAD_PLUGINS": ""}, {"core"}),
        ({"TRADE_DISABLE_PLUGINS": "ALL"}, {"core"}),
    ],
)
def test_allow_and_block_lists_limit_loading(installed_plugins: Path, env: dict[str, str], expected: set[str]) -> None:
    if env.get("TRADE_DISABLE_PLUGINS") == "ALL":  # every installed plugin, essential core included
        listing = json.loads(run_trade("plugins", "--json", env=_with(installed_plugins, "trade-plugin-hello")).out)
        env = {"TRADE_DISABLE_PLUGINS": ",".join(p["name"] for p in listing["plugins"])}
    run = run_trade("plugins", "--json", env=_with(installed_plugins, "trade-plugin-hello", **env))
    assert run.code == 0, run.err
    assert {p["name"] for p in json.loads(run.out)["plugins"]} == expected


def test_unknown_command_of_a_disabled_plugin_is_reported_by_click(installed_plugins: Path) -> None:
    run = run_trade("hello", env=_with(installed_plugins, "trade-plugin-hello", TRADE_DISABLE_PLUGINS="hello"))
    assert run.code == 2 and "No such command 'hello'" in run.err


@pytest.mark.parametrize(
    ("allowed", "unknown"), [("nosuch", "no installed plugin is called 'nosuch'"), ("core,data", None)]
)
def test_a_command_the_allow_list_left_out_says_so(allowed: str, unknown: str | None) -> None:
    run = run_trade("eval", "--help", env={"TRADE_LOAD_PLUGINS": allowed})
    assert run.code == 2 and f"No such command 'eval': TRADE_LOAD_PLUGINS={allowed} loads only" in run.err, run.err
    assert (unknown in run.err) if unknown else "no installed plugin" not in run.err
    assert "installed: core, data," in run.err


def test_collect_attributes_items_and_sets_a_clashing_name_aside_inline(plugin_manager: TradePluginManager) -> None:
    class First:
        @hookimpl
        def trade_register_commands(self, register):  # type: ignore[no-untyped-def]
            register(click.Command("same"))
            register(click.Command("only-first"))

    class Second:
        @hookimpl
        def trade_register_commands(self, register):  # type: ignore[no-untyped-def]
            register(click.Command("same"))

    commands = Registry(hookspecs.trade_register_commands, "command", click.Command)
    with inline_plugin(plugin_manager, First(), "first"):
        found = commands.provided(plugin_manager)
        assert {n: p.origin.name for n, p in found.items()} == {"same": "first", "only-first": "first"}
        with inline_plugin(plugin_manager, Second(), "second"):
            collected = commands.collected(plugin_manager)
            assert list(collected.items) == ["only-first"]
            [clash] = collected.clashes
            assert (clash.name, clash.first.origin.name, clash.second.origin.name) == ("same", "first", "second")
            with pytest.raises(PluginError, match=r"^command 'same' is registered twice: by plugin 'first'"):
                commands.provided(plugin_manager)
    assert commands.provided(plugin_manager) == {}


def test_log_json_switch_changes_the_renderer(installed_plugins: Path) -> None:
    run = run_trade("--log-json", "hello", "--name", "A-shares", env=_with(installed_plugins, "trade-plugin-hello"))
    assert run.code == 0, run.err
    assert [json.loads(line) for line in run.err.splitlines()] == [
        {"event": "hello.done", "name": "A-shares", "level": "info", "timestamp": ANY}
    ]


def _unfit_hooks(manager: TradePluginManager) -> list[str]:
    """Hooks a plugin author cannot use as documented: no docstring, or items not passed to ``register`` (a hook
    that is not an event hook, :func:`~trade_core.hookspecs.eventspec`, is a collection hook)."""
    unfit = []
    for name in sorted(dir(manager.hook)):
        spec = getattr(getattr(manager.hook, name), "spec", None)
        if spec is None:
            continue
        event = getattr(spec.function, EVENT, False)
        register_style = name == "trade_addhooks" or tuple(spec.argnames) == ("register",)
        if not (inspect.getdoc(spec.function) and (event or register_style)):
            unfit.append(name)
    return unfit


def test_every_hook_is_documented_and_every_collection_hook_is_register_style() -> None:
    manager = get_manager()
    assert {"trade_addhooks", "trade_register_commands"} <= set(dir(manager.hook))
    assert _unfit_hooks(manager) == []


def test_the_hook_check_names_a_hook_that_returns_its_items(plugin_manager: TradePluginManager) -> None:
    class Specs:
        @hookspec
        def trade_widgets(self) -> list[str]:
            """Return widgets: the items go unattributed, so the registry cannot name a clash."""

        @hookspec
        def trade_register_gadgets(self, register):  # type: ignore[no-untyped-def]
            pass

    plugin_manager.pm.add_hookspecs(Specs)
    assert _unfit_hooks(plugin_manager) == ["trade_register_gadgets", "trade_widgets"]


def test_events_reach_plugins_in_pluggy_s_own_order(plugin_manager: TradePluginManager, tmp_path: Path) -> None:
    """`notify` (each plugin alone) calls them as one pluggy call would: tryfirst first, then last registered."""
    heard: list[str] = []

    def listener(name: str, **marks: bool) -> object:
        class Listener:
            @hookimpl(**marks)
            def trade_run_finished(self, kind: str, folder: Path) -> None:
                heard.append(name)

        return Listener()

    for name, marks in [("a", {}), ("b", {"tryfirst": True}), ("c", {}), ("d", {"trylast": True})]:
        plugin_manager.register(listener(name, **marks), name)
    plugin_manager.hook.trade_run_finished(kind="backtest", folder=tmp_path, run=None)
    pluggy_order, heard[:] = list(heard), []
    plugin_manager.notify(hookspecs.trade_run_finished, kind="backtest", folder=tmp_path)
    assert heard == pluggy_order == ["b", "c", "a", "d"]
