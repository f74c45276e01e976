"""The memorisation guard's options: a model may have read the prices of days before its pretraining cutoff
(``--model-cutoff`` warns), and ``--anonymize`` hides the symbols and dates it could recognise."""

from __future__ import annotations

import calendar
import datetime as dt
import re

import click
import structlog

log = structlog.get_logger("trade.eval")
_MONTH = re.compile(r"(\d{4})-(\d{2})")


def month_end(cutoff: str) -> dt.date:
    """The last day of a ``YYYY-MM`` month."""
    year, month = map(int, _MONTH.fullmatch(cutoff).groups())  # type: ignore[union-attr]
    return dt.date(year, month, calendar.monthrange(year, month)[1])


def cutoff_warning(cutoff: str | None, first_day: dt.date) -> str | None:
    """One line for the user when the evaluated window starts before the end of the model's cutoff month
    (its pretraining text may hold those prices), else None."""
    if not cutoff or first_day > month_end(cutoff):
        return None
    return (
        f"warning: the evaluated window starts {first_day}, before the end of the model's cutoff {cutoff}: "
        "the model may have seen these prices in pretraining (compare with an --anonymize run)"
    )


def warn_before_cutoff(cutoff: str | None, first_day: dt.date) -> None:
    """Print the warning (stderr) and log it, when there is one."""
    if warning := cutoff_warning(cutoff, first_day):
        log.warning("eval.before_model_cutoff", cutoff=cutoff, first_day=str(first_day))
        click.echo(warning, err=True)


def _month(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not (_MONTH.fullmatch(value) and 1 <= int(value[5:]) <= 12):
        raise click.BadParameter(f"{value!r} is not a month YYYY-MM (e.g. 2024-12)")
    return value


MODEL_CUTOFF = click.Option(
    ["--model-cutoff"],
    metavar="YYYY-MM",
    callback=_month,
    help="The model's pretraining cutoff: warns when the evaluated days start before the end of that month.",
)
"""The option, shared by `trade eval backtest` and `trade eval tasks` (add it to a command's ``params``)."""


ANONYMIZE = click.Option(
    ["--anonymize"],
    is_flag=True,
    help="The model sees per-episode aliases for stocks and trading days relative to T0 (compare with a plain "
    "run: a model that trades on memory does worse anonymized).",
)
"""The option, shared by `trade eval backtest` and `trade eval tasks`."""
