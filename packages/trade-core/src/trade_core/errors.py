"""Errors the ``trade`` CLI turns into one line: what is wrong, then what to do."""

from __future__ import annotations

from pydantic import ValidationError


class TradeError(Exception):
    """A user-facing failure; the CLI prints ``error: <message>`` without a traceback."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def one_line(self) -> str:
        """The message and hint on one line, whatever a wrapped library message contained."""
        return " ".join(str(self).split())


class PluginError(TradeError):
    """A plugin could not be loaded or registered something invalid."""


def error_line(error: Exception, limit: int = 200) -> str:
    """One short line: a ValidationError's first problem as ``where: what``, cut to ``limit`` characters
    (a dict key in ``where`` can be as long as the input)."""
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc']) or 'value'}: {first['msg']}"[:limit]
    return " ".join(str(error).split())[:limit]
