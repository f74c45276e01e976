"""``trade distill``: turn a trained agent's trajectories into training data for another model."""

from __future__ import annotations

import click

from trade_core.cli import LazyGroup

SUBCOMMANDS = {
    "filter": "trade_distill.commands.filter:filter_command",
    "export": "trade_distill.commands.export:export_command",
}


@click.group("distill", cls=LazyGroup, lazy=SUBCOMMANDS)
def distill_group() -> None:
    """Distil a trained agent: keep its good trajectories, export them for ms-swift LoRA."""
