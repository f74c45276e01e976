"""Anonymized episodes: the memorisation guard's aliases for symbols and dates, and their reversal.

A model pretrained on market text may remember what a stock or a day did. In an anonymized episode
(``Task.anonymized``) the model sees a stable per-episode alias for each stock (its board kept: the price
limits depend on it), a neutral name for each index, rebased index levels and trading days relative to T0;
prices and money keep their scale (orders, lots and fees are in real CNY). The Episode translates at its
boundary: the model's arguments on the way in (aliases to real symbols; any real code or date it types is
masked first, so it can neither trade on a remembered code nor have a guess confirmed), every text on the
way out (real symbols and calendar dates to aliases, unknown codes to a placeholder). The mapping is
serialised with the Episode, so a trajectory can be read back with :meth:`Aliases.reveal`.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from trade_data.summary import INDEX_NAMES
from trade_data.symbols import Board, board_of
from trade_tools.tool import EXAMPLE_SYMBOL

BOARD_PREFIX = {Board.MAIN: "主板", Board.CHINEXT: "创业板", Board.STAR: "科创板", Board.BEIJING: "北交所"}
"""A stock alias is its board and a number drawn per episode: 主板017, 创业板003, 科创板105."""
INDEX_LEVEL = 1000.0
"""An anonymized index is shown rebased to this level at the T0 close: its level would date the day."""
EXAMPLE_ALIAS = "主板001"
"""The example code tool schemas show in anonymized mode (the same for every episode)."""
OTHER_SYMBOL = "其他股票"
"""What a real code outside the episode (or one the model typed) reads as."""
SOME_DAY = "某日"
SOME_YEAR = "某年"

_SYMBOL = r"(?<![A-Za-z0-9])(?:SH|SZ|BJ)\d{6}(?!\d)"
_DATE = (
    r"(?<!\d)(?P<y>(?:19|20)\d{2})"
    r"(?:(?P<sep>[-/.])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})|(?P<mm>\d{2})(?P<dd>\d{2}))(?!\d)"
)
_YEAR = r"(?<!\d)(?:19|20)\d{2}年(?:\d{1,2}月(?:\d{1,2}日)?)?"
_HIDDEN = f"(?P<symbol>{_SYMBOL})|(?P<date>{_DATE})|(?P<year>{_YEAR})"
_FIRST = "(?=[0-9SsBb])"
"""Every match starts with a digit or a code's first letter: checked first, it makes a pass 4x faster."""
_OUTPUT = re.compile(f"{_FIRST}(?:{_HIDDEN})", re.IGNORECASE)
_INPUT = re.compile(f"{_FIRST}(?:{_HIDDEN}|(?P<code>(?<![\\d.])\\d{{6}}(?![\\d.])))", re.IGNORECASE)


def index_alias(symbol: str) -> str | None:
    """An index by its name (沪深300指数): the name dates nothing, and it is the same in every episode."""
    name = INDEX_NAMES.get(symbol)
    return None if name is None else name if name.endswith("指数") else f"{name}指数"


def hide_schemas(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas as every anonymized episode shows them: an alias as the example code, indices by name.

    They are the same for every episode, so a trainer whose tool config is one file for all rows (verl) can
    write these when its tasks are anonymized.
    """
    text = json.dumps(schemas, ensure_ascii=False).replace(EXAMPLE_SYMBOL, EXAMPLE_ALIAS)
    for code, name in INDEX_NAMES.items():  # "SH000300 沪深300" reads "沪深300指数", not "沪深300指数 沪深300"
        if alias := index_alias(code):
            text = text.replace(f"{code} {name}", alias)
    return json.loads(re.sub(_SYMBOL, lambda found: index_alias(found[0].upper()) or OTHER_SYMBOL, text, flags=re.I))


class Aliases(BaseModel):
    """One episode's mapping: real symbol -> alias, and each calendar date shown -> its relative day."""

    symbols: dict[str, str] = Field(description="pool, holdings and indices: real symbol -> alias")
    dates: dict[str, str] = Field(default_factory=dict, description="ISO date -> relative day, as shown so far")

    @classmethod
    def draw(cls, task_id: str, stocks: list[str], indices: list[str]) -> Aliases:
        """Aliases seeded by the task id alone, so the same task gets the same ones wherever it is opened."""
        seed = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:8], "little")
        numbers = np.random.default_rng(seed).permutation(np.arange(1, 1000))
        symbols = {s: f"{BOARD_PREFIX[board_of(s)]}{n:03d}" for s, n in zip(sorted(set(stocks)), numbers, strict=False)}
        symbols |= {index: index_alias(index) or f"指数{k}" for k, index in enumerate(indices, start=1)}
        return cls(symbols=symbols)

    def day(self, day: dt.date, calendar: np.ndarray) -> str:
        """``T0``, ``T-k`` for the k-th trading day before it, or a count of calendar days for any other date
        (``calendar``: the trading days up to T0). Recorded, so :meth:`reveal` can give it back."""
        position = int(np.searchsorted(calendar, np.datetime64(day, "D")))
        if position < len(calendar) and calendar[position] == np.datetime64(day, "D"):
            shift = len(calendar) - 1 - position
            alias = f"T-{shift}" if shift else "T0"
        else:
            days = (day - calendar[-1].astype(dt.date)).days
            alias = f"T0{'后' if days > 0 else '前'}{abs(days)}个自然日"
        self.dates.setdefault(day.isoformat(), alias)
        return alias

    def hide(self, text: str, calendar: np.ndarray) -> str:
        """``text`` as the model may read it: symbols, dates and years replaced (the safety net over every text)."""
        return _OUTPUT.sub(lambda found: self._hidden(found, calendar), text)

    def _hidden(self, found: re.Match[str], calendar: np.ndarray) -> str:
        if found["symbol"]:
            return self.symbols.get(found["symbol"].upper(), OTHER_SYMBOL)
        if found["date"]:
            try:
                day = dt.date(int(found["y"]), int(found["m"] or found["mm"]), int(found["d"] or found["dd"]))
            except ValueError:
                return SOME_DAY
            return self.day(day, calendar)
        return SOME_YEAR

    def arguments(self, value: Any) -> Any:
        """The model's arguments as the tools take them: any real code, date or year it typed masked (a
        remembered code must not trade, nor a guess come back as its alias), then exact aliases made real."""
        if isinstance(value, dict):
            return {self.arguments(k): self.arguments(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.arguments(v) for v in value]
        if not isinstance(value, str):
            return value
        masked = _INPUT.sub(lambda f: OTHER_SYMBOL if f["symbol"] or f["code"] else SOME_DAY, value)
        return self._real.get(masked.strip().upper(), masked)

    @functools.cached_property
    def _real(self) -> dict[str, str]:
        return {alias.upper(): real for real, alias in self.symbols.items()}

    def reveal(self, text: str) -> str:
        """``text`` with real symbols and dates in place of the aliases (``T0`` stays: it names the day itself)."""
        back = {alias: real for real, alias in self.symbols.items()}
        back |= {alias: day for day, alias in self.dates.items() if alias != "T0"}
        if not back:
            return text
        pattern = "|".join(re.escape(a) for a in sorted(back, key=len, reverse=True))
        return re.sub(f"(?:{pattern})(?!\\d)", lambda found: back[found[0]], text)
