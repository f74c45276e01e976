"""Small formatting and parsing helpers shared by the built-in tools' texts, and the language they are written in.

Every text the model reads is written once per language, side by side, through :func:`say`::

    raise ToolError(say(f"{symbol} 不在股票池中", f"{symbol} is not in the pool"))

:func:`say` picks by the language being spoken, which an Episode sets (:func:`speaking`) while it renders its
prompts and schemas and answers a call; outside one it is Chinese, the default.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from trade_tools.tool import ToolError

if TYPE_CHECKING:
    import numpy as np

Language = Literal["zh", "en"]
LANGUAGES: tuple[Language, ...] = ("zh", "en")
_SPOKEN: contextvars.ContextVar[Language] = contextvars.ContextVar("trade_tools_language", default="zh")


def say(zh: str, en: str) -> str:
    """``zh`` or ``en``, whichever language is being spoken (:func:`speaking`; Chinese by default)."""
    return en if _SPOKEN.get() == "en" else zh


def spoken() -> Language:
    """The language :func:`say` picks now."""
    return _SPOKEN.get()


@contextlib.contextmanager
def speaking(language: Language) -> Iterator[None]:
    """Within the block, :func:`say` picks ``language`` (this thread or task only)."""
    token = _SPOKEN.set(language)
    try:
        yield
    finally:
        _SPOKEN.reset(token)


MAX_PERIOD = 250
SHOWN = 40
"""Characters of the model's own input an error echoes back: enough to recognise it, never a flood."""
_PERIOD = re.compile(r"^\s*(\d{1,4})\s*[dD日]?\s*$")


def parse_period(period: str | int, *, minimum: int = 1, maximum: int = MAX_PERIOD) -> int:
    """'20d', '20', 20 -> 20 trading days, within bounds; anything else is a ToolError."""
    match = _PERIOD.match(str(period))
    days = int(match.group(1)) if match else None
    if days is None or not minimum <= days <= maximum:
        raise ToolError(
            say(
                f'period {shown(period)!r} 无效：应为{minimum}到{maximum}之间的交易日数，例如 "20d"',
                f'invalid period {shown(period)!r}: trading days from {minimum} to {maximum}, e.g. "20d"',
            )
        )
    return days


def shown(value: object, limit: int = SHOWN) -> str:
    """``value`` as an error echoes it: at most ``limit`` characters, however long the input."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:  # over ``limit`` digits; str() may refuse it
        return say(f"（超过{limit}位的整数）", f"(an integer of over {limit} digits)")
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def price(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def signed_pct(value: float) -> str:
    """``+1.23%`` / ``-1.23%``, and ``0.00%`` for what rounds to zero (``-0.00%`` read as a loss)."""
    shown = f"{value:+.2%}"
    return "0.00%" if shown in ("+0.00%", "-0.00%") else shown


def pct(value: float) -> str:
    return "-" if math.isnan(value) else signed_pct(value)


def lots(shares: float) -> str:
    """Volume in 手 (100 shares), compact: 2.5万手, 1.3亿手."""
    if math.isnan(shares):
        return "-"
    hands = shares / 100
    if hands >= 1e8:
        return f"{hands / 1e8:.2f}亿手"
    if hands >= 1e4:
        return f"{hands / 1e4:.2f}万手"
    return f"{hands:.0f}手"


def day(value: np.datetime64) -> str:
    return str(value)[:10]


def mark(change: float) -> str:
    if math.isnan(change):
        return "-"
    shown = f"{abs(change):.2%}"
    return ("→" if shown == "0.00%" else "↑" if change > 0 else "↓") + shown
