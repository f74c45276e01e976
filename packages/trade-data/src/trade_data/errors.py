"""Errors raised by trade-data; all are one-line :class:`TradeError` messages for the CLI."""

from trade_core.errors import TradeError


class DataValidationError(TradeError):
    """Input bars, calendars or universe files that cannot be imported as they are."""


class DatasetError(TradeError):
    """A dataset folder that is missing, incomplete or not a Qlib provider dir."""
