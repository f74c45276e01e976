"""The memorisation guard's warning: a model may have read the prices of days before its pretraining cutoff."""

from __future__ import annotations

import calendar
import datetime as dt
import re

import click

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
