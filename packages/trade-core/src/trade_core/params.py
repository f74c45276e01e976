"""Click parameter types shared by every package's commands."""

from __future__ import annotations

import datetime as dt
import re

import click

from trade_core.errors import TradeError

_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class IsoDate(click.ParamType):
    """A date written YYYY-MM-DD and nothing else.

    ``date.fromisoformat`` also takes ``20240614`` and pandas reads ``01/02/2024`` as January 2nd, so a
    loose parser would run a day the user did not mean; a wrong date is one line (``error: ...``, exit 2).
    """

    name = "YYYY-MM-DD"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> dt.date:
        if isinstance(value, dt.date):
            return value
        text = str(value)
        if _ISO_DATE.fullmatch(text):
            try:
                return dt.date.fromisoformat(text)
            except ValueError:
                pass
        option = "/".join(param.opts) + " " if param is not None else ""
        raise TradeError(f"{option}{text!r} is not a date YYYY-MM-DD", hint="e.g. 2024-06-14")


ISO_DATE = IsoDate()
