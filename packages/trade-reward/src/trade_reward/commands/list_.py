"""``trade reward list``: every registered reward scheme, who registered it, and its settings."""

from __future__ import annotations

import json
from typing import Any

import click


def _type_name(annotation: object) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def describe_schemes() -> list[dict[str, Any]]:
    """One entry per scheme: name, plugin and distribution, description, settings with defaults."""
    from pydantic_core import PydanticUndefined, to_jsonable_python

    from trade_reward.schemes import SCHEMES

    entries = []
    for name, provided in sorted(SCHEMES.provided().items()):
        settings = []
        for field_name, field in provided.item.Settings.model_fields.items():
            default = field.get_default(call_default_factory=True)
            settings.append(
                {
                    "name": field_name,
                    "type": _type_name(field.annotation),
                    "default": None if default is PydanticUndefined else to_jsonable_python(default),
                    "required": field.is_required(),
                    "description": field.description or "",
                }
            )
        entries.append(
            {
                "name": name,
                "plugin": provided.origin.name,
                "distribution": provided.origin.dist,
                "version": provided.origin.version,
                "description": provided.item.description,
                "settings": settings,
            }
        )
    return entries


@click.command("list", short_help="List the registered reward schemes and their settings.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of text.")
def list_command(as_json: bool) -> None:
    """List every reward scheme a plugin registered, with its description and settings (defaults).

    Pick one with `--scheme NAME` (explain, variance) or verl's
    `+reward.custom_reward_function.reward_kwargs.scheme=NAME`; change a setting with `--set KEY=VALUE`.
    """
    schemes = describe_schemes()
    if as_json:
        click.echo(json.dumps(schemes, ensure_ascii=False, indent=2))
        return
    for scheme in schemes:
        click.echo(f"{scheme['name']}  ({scheme['distribution']} {scheme['version']}, plugin {scheme['plugin']})")
        click.echo(f"    {scheme['description']}")
        for setting in scheme["settings"]:
            value = "required" if setting["required"] else json.dumps(setting["default"], separators=(",", ":"))
            about = f"  {setting['description']}" if setting["description"] else ""
            click.echo(f"    --set {setting['name']}={value}  ({setting['type']}){about}")
