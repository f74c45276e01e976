"""Errors the ``trade`` CLI turns into one line: what is wrong, then what to do."""

from __future__ import annotations


class TradeError(Exception):
    """A user-facing failure; the CLI prints ``error: <message>`` without a traceback."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        """The message and hint on one line, whatever a wrapped library message contained."""
        text = " ".join(str(self).split())
        return f"{text} ({self.hint})" if self.hint else text


class PluginError(TradeError):
    """A plugin could not be loaded or registered something invalid."""
