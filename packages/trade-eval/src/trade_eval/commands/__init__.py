"""``trade eval``: backtest a policy over many days, serve a model for it, report on runs."""

from __future__ import annotations

import click

from trade_core.cli import LazyGroup

SUBCOMMANDS = {
    "backtest": "trade_eval.commands.backtest:backtest_command",
    "serve": "trade_eval.commands.serve:serve_command",
    "report": "trade_eval.commands.report:report_command",
    "tasks": "trade_eval.commands.tasks:tasks_command",
    "compare": "trade_eval.commands.compare:compare_command",
    "dashboard": "trade_eval.commands.dashboard:dashboard_command",
}


@click.group("eval", cls=LazyGroup, lazy=SUBCOMMANDS)
def eval_group() -> None:
    """Evaluate a policy: a multi-day backtest against a served model or a baseline, its report."""
