"""Errors the ``trade`` CLI turns into one line: what is wrong, then what to do."""

from __future__ import annotations


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
