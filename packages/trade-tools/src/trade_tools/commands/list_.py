"""``trade tools list``."""

from __future__ import annotations

import json

import click


@click.command("list", short_help="List the registered tools and their arguments.")
@click.option("--json", "as_json", is_flag=True, help="Print the OpenAI function schemas.")
def list_command(as_json: bool) -> None:
    """List every registered tool with its arguments (schemas as vLLM and verl receive them)."""
    from trade_tools.tool import TOOLS

    tools = TOOLS.provided()
    if as_json:
        click.echo(json.dumps([p.item.schema() for p in tools.values()], ensure_ascii=False, indent=2))
        return
    for name, provided in tools.items():
        parameters = provided.item.schema()["function"]["parameters"]
        args = ", ".join(k + ("" if k in parameters["required"] else "?") for k in parameters["properties"])
        click.echo(f"{name}({args})  [{provided.origin.dist}]\n    {provided.item.description}")
