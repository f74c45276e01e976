"""A broken plugin is named once, in one line, and skipped; the CLI and every other plugin keep working."""

from __future__ import annotations

import importlib.util
import json
import signal
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import structlog

from trade_core import hookimpl
from trade_core.errors import PluginError
from trade_core.hookspecs import trade_register_commands
from trade_core.plugins import TradePluginManager, get_manager, load_entry_points, new_manager
from trade_core.registry import collect, register_hooks
from trade_core.testing import TradeRun, inline_plugin, run_trade

FAULTY = (
    "faulty-argname",
    "faulty-commands",
    "faulty-duplicate-tool",
    "faulty-exit",
    "faulty-hook-exit",
    "faulty-nonsense",
    "faulty-tools",
    "faulty-type",
)
"""The entry points of tests/fixtures/trade-plugin-faulty, one per way of breaking."""
with_packages = pytest.mark.skipif(
    importlib.util.find_spec("trade_tools") is None, reason="breaks hooks of trade-tools and trade-data"
)
"""Marks the tests that need trade-tools and trade-data installed (trade-core's other tests need only trade-core)."""


def _faulty(site: Path, plugin: str, *args: str, **env: str) -> TradeRun:
    """Run ``trade`` with only one of the faulty plugins loaded (besides the built-ins), logging JSON lines."""
    others = ",".join(name for name in FAULTY if name != plugin)
    environment = {"PYTHONPATH": str(site / "trade-plugin-faulty"), "TRADE_DISABLE_PLUGINS": others}
    return run_trade(*args, env={**environment, "TRADE_LOG_JSON": "1", **env})


def _errors(run: TradeRun) -> list[str]:
    assert "Traceback" not in run.err, run.err
    events = [json.loads(line) for line in run.err.splitlines()]
    assert all(event["level"] == "error" for event in events), events
    return [event["event"] for event in events]


def _listed(run: TradeRun) -> dict[str, dict[str, Any]]:
    assert run.code == 0, run.err
    return {row["name"]: row for row in json.loads(run.out)["plugins"]}


def test_a_raising_commands_hook_is_one_named_line_and_every_other_command_works(installed_plugins: Path) -> None:
    line = (
        "plugin 'faulty-commands' from trade-plugin-faulty 0.2.0 failed in trade_register_commands: "
        "RuntimeError: the commands hook of a faulty plugin"
    )
    help_ = _faulty(installed_plugins, "faulty-commands", "--help")
    assert help_.code == 0 and _errors(help_) == [line]
    assert "  plugins " in help_.out and "faulty" not in help_.out  # registered before raising, so dropped too
    listing = _faulty(installed_plugins, "faulty-commands", "plugins", "--json")
    assert _errors(listing) == [line]  # collected twice (CLI and listing), reported once
    row = _listed(listing)["faulty-commands"]
    assert (row["status"], row["distribution"], row["hooks"]) == ("failed", "trade-plugin-faulty", {})
    assert row["failures"] == [
        {"hook": "trade_register_commands", "cause": "RuntimeError: the commands hook of a faulty plugin"}
    ]
    assert _listed(listing)["core"]["status"] == "ok"


def test_strict_mode_makes_a_raising_hook_an_error_naming_the_plugin(installed_plugins: Path) -> None:
    run = _faulty(installed_plugins, "faulty-commands", "--help", TRADE_STRICT_PLUGINS="1")
    assert run.code == 2
    [line] = run.err.strip().splitlines()
    assert line.startswith("error: plugin 'faulty-commands' from trade-plugin-faulty 0.2.0 failed in trade_register_")


def test_sys_exit_at_import_is_a_load_failure_not_the_exit_status(installed_plugins: Path) -> None:
    run = _faulty(installed_plugins, "faulty-exit", "plugins", "--json")
    assert _errors(run) == ["plugin 'faulty-exit' from trade-plugin-faulty 0.2.0 failed to load: SystemExit: 3"]
    row = _listed(run)["faulty-exit"]
    assert (row["status"], row["module"], row["failures"]) == (
        "failed",
        "trade_plugin_faulty.exits",
        [{"hook": None, "cause": "SystemExit: 3"}],
    )
    assert _faulty(installed_plugins, "faulty-exit", "--help").code == 0


@with_packages
def test_sys_exit_in_register_hooks_is_a_failure_not_the_exit_status(installed_plugins: Path) -> None:
    line = "plugin 'faulty-hook-exit' from trade-plugin-faulty 0.2.0 failed in trade_register_{}: SystemExit: {}"
    listing = _faulty(installed_plugins, "faulty-hook-exit", "plugins", "--json")
    assert _errors(listing) == [line.format("commands", 4), line.format("tools", 5)]
    assert _listed(listing)["faulty-hook-exit"]["failures"] == [
        {"hook": "trade_register_commands", "cause": "SystemExit: 4"},
        {"hook": "trade_register_tools", "cause": "SystemExit: 5"},
    ]
    run = _faulty(installed_plugins, "faulty-hook-exit", "tools", "list")
    assert run.code == 0 and run.out.count("  [trade-tools]") == 4
    assert _errors(run) == [line.format("commands", 4), line.format("tools", 5)]


@with_packages
def test_a_tool_name_two_plugins_register_is_listed_and_refused_naming_both(installed_plugins: Path) -> None:
    clash = (
        "'get_price_data' is registered twice: by plugin 'faulty-duplicate-tool' (trade-plugin-faulty) "
        "and by plugin 'tools' (trade-tools)"
    )
    listing = _faulty(installed_plugins, "faulty-duplicate-tool", "plugins", "--json")
    assert _errors(listing) == []
    rows = _listed(listing)
    for name in ("faulty-duplicate-tool", "tools"):
        assert rows[name]["status"] == "conflict"
        assert rows[name]["conflicts"] == [{"hook": "trade_register_tools", "cause": clash}]
        assert "get_price_data" in rows[name]["hooks"]["trade_register_tools"]
    text = _faulty(installed_plugins, "faulty-duplicate-tool", "plugins")
    assert f"    trade_register_tools CONFLICT: {clash}\n" in text.out
    assert _faulty(installed_plugins, "faulty-duplicate-tool", "--help").code == 0
    run = _faulty(installed_plugins, "faulty-duplicate-tool", "tools", "list")
    assert (run.code, run.out) == (2, "")
    assert run.err == f"error: tool {clash} (uninstall one of them or disable it with TRADE_DISABLE_PLUGINS)\n"


def test_a_hook_no_plugin_defines_unregisters_only_that_plugin(installed_plugins: Path) -> None:
    run = _faulty(installed_plugins, "faulty-nonsense", "plugins", "--json")
    [line] = _errors(run)
    assert line.startswith("plugin 'faulty-nonsense' from trade-plugin-faulty 0.2.0 failed to load: ")
    assert "unknown hook 'trade_register_nonsense'" in line
    rows = _listed(run)
    assert rows.pop("faulty-nonsense")["status"] == "failed"
    assert {row["status"] for row in rows.values()} == {"ok"} and "core" in rows


@with_packages
def test_a_misspelt_argument_found_when_a_later_plugin_adds_the_spec(installed_plugins: Path) -> None:
    """``faulty-argname`` registers before trade-tools defines its hook, so pluggy's check fires inside tools'."""
    run = _faulty(installed_plugins, "faulty-argname", "tools", "list")
    assert run.code == 0
    [line] = _errors(run)
    assert line.startswith("plugin 'faulty-argname' from trade-plugin-faulty 0.2.0 failed to load: ")
    assert "regster" in line
    assert run.out.count("  [trade-tools]") == 4


@with_packages
def test_a_raising_tools_hook_leaves_the_builtin_tools(installed_plugins: Path) -> None:
    run = _faulty(installed_plugins, "faulty-tools", "tools", "list")
    assert run.code == 0
    assert _errors(run) == [
        "plugin 'faulty-tools' from trade-plugin-faulty 0.2.0 failed in trade_register_tools: "
        "RuntimeError: the tools hook of a faulty plugin"
    ]
    assert run.out.count("  [trade-tools]") == 4


@with_packages
@pytest.mark.slow  # the real dataset is imported once per session
def test_a_raising_tools_hook_leaves_episode_calls_working(installed_plugins: Path, sample_dataset: Path) -> None:
    args = ("tools", "call", "TakeAction", "--args", '{"type": "stop", "reasoning": "不调仓"}')
    run = _faulty(installed_plugins, "faulty-tools", *args, "--data", str(sample_dataset), "--date", "2024-06-03")
    assert run.code == 0 and run.out.startswith("已结束今日交易。")
    [line] = _errors(run)
    assert line.startswith("plugin 'faulty-tools' from trade-plugin-faulty 0.2.0 failed in trade_register_tools: ")


@with_packages
def test_a_command_of_the_wrong_type_is_refused(installed_plugins: Path) -> None:
    cause = "TypeError: registered a NotACommand, not a Command"
    line = "plugin 'faulty-type' from trade-plugin-faulty 0.2.0 failed in trade_register_{}: " + cause
    run = _faulty(installed_plugins, "faulty-type", "data", "--help")
    assert run.code == 0
    assert _errors(run) == [line.format("commands"), line.format("data_commands")]
    assert "not-a-command" not in run.out and "  tasks " in run.out
    row = _listed(_faulty(installed_plugins, "faulty-type", "plugins", "--json"))["faulty-type"]
    assert row["failures"] == [{"hook": "trade_register_commands", "cause": cause}]
    assert "trade_register_commands" not in row["hooks"]  # the listing itself checks no types


def test_text_listing_marks_failed_plugins(installed_plugins: Path) -> None:
    run = _faulty(installed_plugins, "faulty-commands", "plugins")
    assert run.code == 0
    assert (
        "faulty-commands  (trade-plugin-faulty 0.2.0, trade_plugin_faulty.commands)  FAILED\n"
        "    trade_register_commands FAILED: RuntimeError: the commands hook of a faulty plugin\n"
    ) in run.out


@pytest.fixture
def loaded() -> TradePluginManager:
    """A fresh manager with every installed plugin, so inline plugins do not touch the process-wide one."""
    manager = new_manager()
    load_entry_points(manager)
    return manager


class _Raising:
    """An inline plugin whose ``hook`` registers an item, then raises ``error("broken on purpose")``."""

    def __init__(self, hook: Callable[..., None], error: type[BaseException] = ValueError) -> None:
        def half_registered(register: Any) -> None:
            register(SimpleNamespace(name="half"))
            raise error("broken on purpose")

        setattr(self, hook.__name__, hookimpl(half_registered))


@pytest.mark.parametrize("error", [ValueError, SystemExit, KeyboardInterrupt])  # a plugin's own, not a Ctrl-C
@pytest.mark.parametrize("hook", register_hooks(get_manager()), ids=lambda spec: spec.__name__)
def test_a_plugin_raising_in_any_register_hook_is_skipped_and_named_once(
    loaded: TradePluginManager, hook: Callable[..., None], error: type[BaseException]
) -> None:
    def origins() -> dict[str, str]:
        return {name: provided.origin.name for name, provided in collect(loaded, hook).items.items()}

    healthy = origins()
    with inline_plugin(loaded, _Raising(hook, error), "raising"), structlog.testing.capture_logs() as logs:
        assert origins() == healthy  # "half" was registered before the raise, and is dropped
        assert origins() == healthy
    cause = f"{error.__name__}: broken on purpose"
    assert [(f.origin.name, f.hook, f.cause) for f in loaded.failures] == [("raising", hook.__name__, cause)]
    assert [log["event"] for log in logs] == [f"plugin 'raising' from (inline) failed in {hook.__name__}: {cause}"]


def test_the_users_ctrl_c_during_a_register_hook_still_interrupts(loaded: TradePluginManager) -> None:
    class Interrupted:
        @hookimpl
        def trade_register_commands(self, register: Any) -> None:
            signal.raise_signal(signal.SIGINT)  # as the terminal sends it; the handler runs before this returns

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh CLI process
    try:
        with inline_plugin(loaded, Interrupted(), "interrupted"), pytest.raises(KeyboardInterrupt):
            collect(loaded, trade_register_commands)
        assert loaded.failures == [] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_under_a_commands_own_sigint_handler_a_plugins_interrupt_is_its_failure_and_ctrl_c_reaches_the_handler(
    loaded: TradePluginManager,
) -> None:
    """A command that installed its own Ctrl-C handler (a graceful stop) before the registry was collected: the
    plugin's own KeyboardInterrupt is still that plugin's failure, and a real Ctrl-C goes to the command's handler."""
    stops: list[int] = []

    def graceful(signum: int, frame: object) -> None:
        stops.append(signum)
        raise KeyboardInterrupt

    class Interrupted:
        @hookimpl
        def trade_register_commands(self, register: Any) -> None:
            signal.raise_signal(signal.SIGINT)

    before = signal.signal(signal.SIGINT, graceful)
    try:
        with inline_plugin(loaded, _Raising(trade_register_commands, KeyboardInterrupt), "raising"):
            collect(loaded, trade_register_commands)
        assert [f.origin.name for f in loaded.failures] == ["raising"] and stops == []
        with inline_plugin(loaded, Interrupted(), "interrupted"), pytest.raises(KeyboardInterrupt):
            collect(loaded, trade_register_commands)
        assert stops == [signal.SIGINT] and signal.getsignal(signal.SIGINT) is graceful
    finally:
        signal.signal(signal.SIGINT, before)


def test_strict_mode_raises_naming_the_plugin_inline(
    loaded: TradePluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRADE_STRICT_PLUGINS", "1")
    with inline_plugin(loaded, _Raising(trade_register_commands), "raising"), pytest.raises(PluginError) as error:
        collect(loaded, trade_register_commands)
    assert str(error.value).startswith("plugin 'raising' from (inline) failed in trade_register_commands: ")
    assert not loaded.failures


BUILTINS = ("data", "tools", "reward", "eval", "train", "distill")


@with_packages
@pytest.mark.parametrize("disabled", BUILTINS)
def test_disabling_one_builtin_plugin_fails_no_other(disabled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook a plugin implements for another package (tools' bar tables for trade-data, distill's trainer for
    trade-train) is optional: without that package the hook is skipped, not the whole plugin refused."""
    monkeypatch.setenv("TRADE_DISABLE_PLUGINS", disabled)
    manager = new_manager()
    load_entry_points(manager)
    assert [failure.one_line() for failure in manager.failures] == []
    assert sorted(manager.origins) == sorted({"core", *BUILTINS} - {disabled})
