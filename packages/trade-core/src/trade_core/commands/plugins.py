"""``trade plugins``: what is installed, what each plugin provides per hook and which events it hears, which
failed and which clash."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from trade_core.hookspecs import hookimpl
from trade_core.plugins import TradePluginManager, get_manager
from trade_core.registry import collect, event_hooks, register_hooks


def describe_plugins(manager: TradePluginManager) -> list[dict[str, Any]]:
    """Every plugin, loaded or failed, with its distribution, version, module, status, named items per hook and
    the event hooks it implements.

    A name two plugins registered is listed under both, with the clash: this listing is where a user sees it.
    """
    provided: dict[str, dict[str, set[str]]] = {}
    conflicts: dict[str, list[dict[str, str]]] = {}
    for spec in register_hooks(manager):  # collecting first records the plugins whose hooks raise
        collected = collect(manager, spec)
        clashing = [item for clash in collected.clashes for item in (clash.first, clash.second)]
        for item in [*collected.items.values(), *clashing]:
            provided.setdefault(item.origin.name, {}).setdefault(spec.__name__, set()).add(item.name)
        for clash in collected.clashes:
            for name in {clash.first.origin.name, clash.second.origin.name}:
                conflicts.setdefault(name, []).append({"hook": spec.__name__, "cause": clash.line()})
    events: dict[str, list[str]] = {}
    for spec in event_hooks(manager):
        for impl in manager.caller(spec).get_hookimpls():
            events.setdefault(impl.plugin_name, []).append(spec.__name__)
    origins = {**{f.origin.name: f.origin for f in manager.failures}, **manager.origins}
    rows = []
    for name, origin in sorted(origins.items()):
        failures = [{"hook": f.hook, "cause": f.cause} for f in manager.failures if f.origin.name == name]
        status = "failed" if failures else "conflict" if name in conflicts else "ok"
        rows.append(
            {
                "name": name,
                "distribution": origin.dist,
                "version": origin.version,
                "module": origin.module,
                "status": status,
                "hooks": {hook: sorted(items) for hook, items in sorted(provided.get(name, {}).items())},
                "events": events.get(name, []),
                "failures": failures,
                "conflicts": conflicts.get(name, []),
            }
        )
    return rows


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(as_json: bool) -> None:
    """List installed plugins, their distributions, what they provide, the events they hear, which failed and
    which names clash."""
    rows = describe_plugins(get_manager())
    if as_json:
        click.echo(json.dumps({"plugins": rows}, indent=2))
        return
    for row in rows:
        marker = "" if row["status"] == "ok" else f"  {row['status'].upper()}"
        click.echo(f"{row['name']}  ({row['distribution']} {row['version']}, {row['module']}){marker}")
        for hook, items in row["hooks"].items():
            click.echo(f"    {hook}: {', '.join(items)}")
        if row["events"]:
            click.echo(f"    events: {', '.join(row['events'])}")
        for failure in row["failures"]:
            click.echo(f"    {failure['hook'] or 'load'} FAILED: {failure['cause']}")
        for conflict in row["conflicts"]:
            click.echo(f"    {conflict['hook']} CONFLICT: {conflict['cause']}")


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    register(plugins_command)
