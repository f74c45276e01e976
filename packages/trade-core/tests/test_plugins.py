"""The plugin registry: built-ins through entry points, third-party plugins, clashes, broken plugins."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import click
import pytest

from trade_core import hookimpl, hookspecs
from trade_core.errors import PluginError
from trade_core.plugins import collect, get_manager, register_hooks
from trade_core.testing import inline_plugin, run_trade


def _with(site: Path, *names: str, **env: str) -> dict[str, str]:
    path = os.pathsep.join(str(site / n) for n in names)
    return {"PYTHONPATH": path, **env}


def test_builtins_are_listed_with_their_distributions() -> None:
    run = run_trade("plugins", "--json")
    assert run.code == 0, run.err
    plugins = {p["name"]: p for p in json.loads(run.out)["plugins"]}
    assert plugins["core"]["distribution"] == "trade-core"
    assert plugins["core"]["hooks"]["trade_register_commands"] == ["plugins"]
    assert plugins["data"]["distribution"] == "trade-data"
    assert plugins["data"]["hooks"]["trade_register_commands"] == ["data"]


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


def test_two_plugins_registering_one_name_is_an_error_naming_both(installed_plugins: Path) -> None:
    run = run_trade("plugins", env=_with(installed_plugins, "trade-plugin-hello", "trade-plugin-clash"))
    assert run.code == 2
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.err
    assert "command 'hello' is registered twice" in lines[0]
    assert "trade-plugin-clash" in lines[0] and "trade-plugin-hello" in lines[0]


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
    assert (status["broken"], status["data"]) == ("failed", "ok")


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


def test_unknown_command_of_a_disabled_plugin_is_reported_by_click() -> None:
    run = run_trade("data", "info", "x", env={"TRADE_DISABLE_PLUGINS": "data"})
    assert run.code == 2 and "No such command 'data'" in run.err


def test_collect_attributes_items_and_refuses_duplicates_inline(plugin_manager) -> None:  # type: ignore[no-untyped-def]
    class First:
        @hookimpl
        def trade_register_commands(self, register):  # type: ignore[no-untyped-def]
            register(click.Command("same"))
            register(click.Command("only-first"))

    class Second:
        @hookimpl
        def trade_register_commands(self, register):  # type: ignore[no-untyped-def]
            register(click.Command("same"))

    with inline_plugin(plugin_manager, First(), "first"):
        found = collect(plugin_manager, "trade_register_commands", "command")
        assert {n: p.origin.name for n, p in found.items()} == {"same": "first", "only-first": "first"}
        with inline_plugin(plugin_manager, Second(), "second"), pytest.raises(PluginError) as error:
            collect(plugin_manager, "trade_register_commands", "command")
    assert "plugin 'first'" in str(error.value) and "plugin 'second'" in str(error.value)
    assert collect(plugin_manager, "trade_register_commands", "command") == {}


def test_log_json_switch_changes_the_renderer(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("date,symbol,open,high,low,close,volume,factor\n2024-01-02,SH600000,10,10.5,9.9,10.2,1000,1\n")
    run = run_trade("--log-json", "data", "import", str(table), "--out", str(tmp_path / "ds"))
    assert run.code == 0, run.err
    events = [json.loads(line) for line in run.err.splitlines() if line.startswith("{")]
    assert any(e["event"] == "import.done" and e["rows"] == 1 for e in events)


def test_every_hookspec_is_documented_and_every_collection_hook_is_register_style() -> None:
    specs = [f for name, f in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("trade_")]
    assert specs and all(inspect.getdoc(f) for f in specs)
    manager = get_manager()
    for name in register_hooks(manager):
        assert inspect.getdoc(getattr(manager.hook, name).spec.function), name
