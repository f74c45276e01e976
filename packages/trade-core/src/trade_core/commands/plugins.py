"""``trade plugins``: what is installed and what each plugin provides, per hook, and which plugins failed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from trade_core.hookspecs import hookimpl
from trade_core.plugins import TradePluginManager, get_manager
from trade_core.registry import collect, register_hooks


def describe_plugins(manager: TradePluginManager) -> list[dict[str, Any]]:
    """Every plugin, loaded or failed, with its distribution, version, module, status and named items per hook."""
    provided: dict[str, dict[str, list[str]]] = {}
    for hook_name in register_hooks(manager):  # collecting first records the plugins whose hooks raise
        for item in collect(manager, hook_name, hook_name).values():
            provided.setdefault(item.origin.name, {}).setdefault(hook_name, []).append(item.name)
    origins = {**{f.origin.name: f.origin for f in manager.failures}, **manager.origins}
    rows = []
    for name, origin in sorted(origins.items()):
        failures = [{"hook": f.hook, "cause": f.cause} for f in manager.failures if f.origin.name == name]
        rows.append(
            {
                "name": name,
                "distribution": origin.dist,
                "version": origin.version,
                "module": origin.module,
                "status": "failed" if failures else "ok",
                "hooks": {hook: sorted(items) for hook, items in sorted(provided.get(name, {}).items())},
                "failures": failures,
            }
        )
    return rows


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(as_json: bool) -> None:
    """List installed plugins, their distributions, what they provide and which failed."""
    rows = describe_plugins(get_manager())
    if as_json:
        click.echo(json.dumps({"plugins": rows}, indent=2))
        return
    for row in rows:
        failed = "  FAILED" if row["status"] == "failed" else ""
        click.echo(f"{row['name']}  ({row['distribution']} {row['version']}, {row['module']}){failed}")
        for hook, items in row["hooks"].items():
            click.echo(f"    {hook}: {', '.join(items)}")
        for failure in row["failures"]:
            click.echo(f"    {failure['hook'] or 'load'} FAILED: {failure['cause']}")


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    register(plugins_command)
