"""``trade plugins``: what is installed and what each plugin provides, per hook."""

from __future__ import annotations

import json
from collections.abc import Callable

import click

from trade_core.hookspecs import hookimpl
from trade_core.plugins import TradePluginManager, collect, get_manager, register_hooks


def describe_plugins(manager: TradePluginManager) -> list[dict[str, object]]:
    """Every loaded plugin with its distribution, version, module and named items per hook."""
    provided: dict[str, dict[str, list[str]]] = {name: {} for name in manager.origins}
    for hook_name in register_hooks(manager):
        for item in collect(manager, hook_name, hook_name).values():
            provided.setdefault(item.origin.name, {}).setdefault(hook_name, []).append(item.name)
    rows = []
    for name, origin in sorted(manager.origins.items()):
        rows.append(
            {
                "name": name,
                "distribution": origin.dist,
                "version": origin.version,
                "module": origin.module,
                "hooks": {hook: sorted(items) for hook, items in sorted(provided.get(name, {}).items())},
            }
        )
    return rows


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(as_json: bool) -> None:
    """List installed plugins, their distributions and what they provide."""
    manager = get_manager()
    rows = describe_plugins(manager)
    if as_json:
        click.echo(json.dumps({"plugins": rows, "failed": [f.__dict__ for f in manager.failures]}, indent=2))
        return
    for row in rows:
        click.echo(f"{row['name']}  ({row['distribution']} {row['version']}, {row['module']})")
        hooks = row["hooks"]
        assert isinstance(hooks, dict)
        for hook, items in hooks.items():
            click.echo(f"    {hook}: {', '.join(items)}")
    for failure in manager.failures:
        click.echo(f"{failure.name}  FAILED: {failure.cause}")


@hookimpl
def trade_register_commands(register: Callable[[click.Command], None]) -> None:
    register(plugins_command)
