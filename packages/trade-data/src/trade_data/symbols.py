"""What a symbol's code says: exchange board, index or stock, and its daily price limit on a date."""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum

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


def limit_pct(symbol: str, day: dt.date) -> float | None:
    """Daily price limit as a fraction of the previous close; None for indices (no limit).

    ST stocks (+-5%) cannot be told from the code and are treated as their board.
    """
    board = board_of(symbol)
    if board is Board.INDEX:
        return None
    if board is Board.BEIJING:
        return 0.30
    if board is Board.STAR:
        return 0.20
    if board is Board.CHINEXT:
        return 0.20 if day >= CHINEXT_20PCT_FROM else 0.10
    return 0.10
