"""``trade reward``: list the schemes, explain one episode's reward, measure GRPO group variance."""

from __future__ import annotations

import click

from trade_core.cli import LazyGroup

SUBCOMMANDS = {
    "list": "trade_reward.commands.list_:list_command",
    "explain": "trade_reward.commands.explain:explain_command",
    "variance": "trade_reward.commands.variance:variance_command",
}


@click.group("reward", cls=LazyGroup, lazy=SUBCOMMANDS)
def reward_group() -> None:
    """Reward schemes: list them, explain a reward, check GRPO groups for zero variance."""
