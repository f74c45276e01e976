"""What a symbol's code says: exchange board, index or stock; and the boards' daily price limits by date."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

SYMBOL_PATTERN = re.compile(r"^(SH|SZ|BJ)\d{6}$")
CHINEXT_20PCT_FROM = dt.date(2020, 8, 24)
"""ChiNext moved from +-10% to +-20% daily limits on this date (registration reform)."""


class Board(StrEnum):
    MAIN = "main"
    CHINEXT = "chinext"
    STAR = "star"
    BEIJING = "beijing"
    INDEX = "index"


def is_valid_symbol(symbol: str) -> bool:
    return bool(SYMBOL_PATTERN.match(symbol))


def board_of(symbol: str) -> Board:
    """Board from the code: SH000/SZ399 indices, SH688/689 STAR, SZ30x ChiNext, BJ Beijing, else main."""
    market, code = symbol[:2], symbol[2:]
    if (market == "SH" and code.startswith("000")) or (market == "SZ" and code.startswith("399")):
        return Board.INDEX
    if market == "BJ":
        return Board.BEIJING
    if market == "SH" and code.startswith(("688", "689")):
        return Board.STAR
    if market == "SZ" and code.startswith("30"):
        return Board.CHINEXT
    return Board.MAIN


class PriceLimit(NamedTuple):
    """A board's daily price limit, a fraction of the last close, from ``since`` until its next entry."""

    board: Board
    since: dt.date
    fraction: float


PRICE_LIMITS: tuple[PriceLimit, ...] = (
    PriceLimit(Board.MAIN, dt.date.min, 0.10),
    PriceLimit(Board.CHINEXT, dt.date.min, 0.10),
    PriceLimit(Board.CHINEXT, CHINEXT_20PCT_FROM, 0.20),
    PriceLimit(Board.STAR, dt.date.min, 0.20),
    PriceLimit(Board.BEIJING, dt.date.min, 0.30),
)
"""The exchanges' limits: the one table the store's flags, the execution rules and the prompt read.

``dt.date.min`` means since the board's first listing: no data here needs an earlier regime. ST stocks (+-5%)
cannot be told from the code and trade under their board's limit; indices have none.
"""


def board_limits(day: dt.date, limits: Sequence[PriceLimit] = PRICE_LIMITS) -> dict[Board, float]:
    """Each board's limit on ``day``: its latest entry on or before that day."""
    in_force: dict[Board, float] = {}
    for limit in sorted(limits, key=lambda entry: entry.since):
        if limit.since <= day:
            in_force[limit.board] = limit.fraction
    return in_force


def limit_pct(symbol: str, day: dt.date, limits: Sequence[PriceLimit] = PRICE_LIMITS) -> float | None:
    """Daily price limit as a fraction of the previous close; None for indices (no limit)."""
    return board_limits(day, limits).get(board_of(symbol))


def limit_fractions(
    symbols: Sequence[str], days: Sequence[dt.date], limits: Sequence[PriceLimit] = PRICE_LIMITS
) -> np.ndarray:
    """[day, symbol] daily limit fractions (NaN for indices), read once per day and board."""
    import numpy as np  # here only: the rest of this module is what a code says, read by light commands too

    boards = np.array([board_of(s) for s in symbols])
    fractions = np.full((len(days), len(symbols)), np.nan)
    for i, day in enumerate(days):
        for board, fraction in board_limits(day, limits).items():
            fractions[i, boards == board] = fraction
    return fractions
