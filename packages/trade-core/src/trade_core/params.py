"""Click parameter types shared by every package's commands."""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import inspect
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import click

from trade_core.errors import TradeError

_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def iso_date(text: str) -> dt.date:
    """``YYYY-MM-DD`` and nothing else; ValueError otherwise.

    ``date.fromisoformat`` also takes ``20240614`` and pandas reads ``01/02/2024`` as January 2nd: a loose
    parser runs a day the user did not mean.
    """
    if not _ISO_DATE.fullmatch(text):
        raise ValueError(f"{text!r} is not YYYY-MM-DD")
    return dt.date.fromisoformat(text)


class IsoDate(click.ParamType):
    """A date option: :func:`iso_date`, and a wrong date is one line (``error: ...``, exit 2)."""

    name = "YYYY-MM-DD"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> dt.date:
        if isinstance(value, dt.date):
            return value
        try:
            return iso_date(str(value))
        except ValueError:
            option = "/".join(param.opts) + " " if param is not None else ""
            raise TradeError(f"{option}{value!r} is not a date YYYY-MM-DD", hint="e.g. 2024-06-14") from None


ISO_DATE = IsoDate()


class FiniteRange(click.FloatRange):
    """click's FloatRange, without NaN: NaN compares false with both bounds, so FloatRange passes it through
    (``--temperature nan``, ``--anonymize-noise nan``) to become the numbers a run prints."""

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


def settings_from(pairs: Iterable[str], *, example: str) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as a dict: a value is JSON when it parses (numbers, true, lists), else text.

    ``example`` is shown in the one-line error for a pair without ``=`` (e.g. ``"scale=25"``).
    """
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TradeError(f"--set {pair!r} is not KEY=VALUE", hint=f"e.g. --set {example}")
        try:
            settings[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            settings[key.strip()] = value
    return settings


def grouped(**groups: type | str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Hand a command its options as a few typed groups instead of one argument each.

    click passes every option as a keyword named after it; each group (a pydantic model or a dataclass, or its
    ``"module:attribute"``, imported on use so ``--help`` stays light) is built from the keywords its fields name,
    and the rest pass through. The options themselves, hence the flags, ``--help`` and the errors, are untouched.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(**options: Any) -> Any:
            for name, group in groups.items():
                module, _, attribute = group.partition(":") if isinstance(group, str) else ("", "", "")
                kind = getattr(importlib.import_module(module), attribute) if module else group
                fields = [key for key in inspect.signature(kind).parameters if key in options]
                options[name] = kind(**{key: options.pop(key) for key in fields})
            return command(**options)

        return run

    return decorate
