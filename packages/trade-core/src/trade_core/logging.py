"""structlog set up once per process: a human console by default, JSON lines on request."""

from __future__ import annotations

import logging
import sys

import structlog

_configured: tuple[bool, str] | None = None


def configure_logging(*, json: bool = False, level: str = "info") -> None:
    """Route structlog to stderr; repeated calls with the same settings do nothing."""
    global _configured
    if _configured == (json, level):
        return
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _configured = (json, level)
