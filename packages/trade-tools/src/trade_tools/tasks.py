"""Deprecated name of :mod:`trade_tools.sampler` (four modules were called "tasks"); kept so users' imports work."""

from __future__ import annotations

import warnings
from typing import Any

from trade_tools import sampler


def __getattr__(name: str) -> Any:
    warnings.warn("trade_tools.tasks is now trade_tools.sampler", DeprecationWarning, stacklevel=2)
    return getattr(sampler, name)
