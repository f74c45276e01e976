"""Anonymized episodes: the memorisation guard's aliases for symbols and dates, and their reversal.

A model pretrained on market text may remember what a stock or a day did. In an anonymized episode
(``Task.anonymized``) the model sees a stable per-episode alias for each stock (its board kept: the price
limits depend on it), a neutral name for each index, trading days relative to T0 and no level that identifies
a stock or a day: each stock's prices on its own scale (its T0 close mapped to a level drawn per episode), its
volumes on another, indices rebased to 1000 at the T0 close and their volumes to a fixed level. Money stays real
CNY, so a stock's quantities are in units of its scale (units x shown price = CNY; :meth:`Aliases.shares`
turns an order into real shares). Every relative figure (returns, ratios, ranks) is the plain episode's. The
Episode translates at its boundary: the model's arguments on the way in (aliases to real symbols; any real code
or date it types is masked first, so it can neither trade on a remembered code nor have a guess confirmed),
every text on the way out (real symbols and calendar dates to aliases, unknown codes to a placeholder). The
mapping is serialised with the Episode, so a trajectory can be read back with :meth:`Aliases.reveal`.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from trade_data.summary import INDEX_NAMES
from trade_data.symbols import Board, board_of
from trade_tools.tool import EXAMPLE_SYMBOL

if TYPE_CHECKING:
    from trade_data.store import PointInTimeView
    from trade_tools.rules import ExecutionRules

BOARD_PREFIX = {Board.MAIN: "主板", Board.CHINEXT: "创业板", Board.STAR: "科创板", Board.BEIJING: "北交所"}
"""A stock alias is its board and a number drawn per episode: 主板017, 创业板003, 科创板105."""
INDEX_LEVEL = 1000.0
"""An anonymized index is shown rebased to this level at the T0 close: its level would date the day."""
EXAMPLE_ALIAS = "主板001"
"""The example code tool schemas show in anonymized mode (the same for every episode)."""
OTHER_SYMBOL = "其他股票"
"""What a real code outside the episode (or one the model typed) reads as."""
PRICE_LEVELS = (10.0, 100.0)
"""An anonymized stock's T0 close is drawn log-uniform in this range (CNY per unit): no real level shows."""
VOLUME_LEVELS = (1e6, 1e8)
"""Its mean volume over the last :data:`VOLUME_DAYS` bars is drawn log-uniform in this range (shares)."""
INDEX_VOLUME = 1e10
"""An anonymized index's mean volume over the last :data:`VOLUME_DAYS` bars, shares: its volume dates the day."""
VOLUME_DAYS = 20
UNITS_TEXT = {
    "（最新价即T0实际收盘价）": "，按本股的显示比例（见交易规则）",
    "amount 股": "amount 单位",
    "股数，正整数": "单位数，正整数（折算为真实整手成交，见交易规则）",
}
"""The tool descriptions' words for prices and quantities, as an anonymized episode's schemas say them."""
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


def _volume_scale(view: PointInTimeView, symbol: str, level: float) -> float:
    """``level`` over the symbol's mean volume on its last traded bars (1 when it has none)."""
    volume = view.window(symbol, VOLUME_DAYS).volume
    mean = float(volume.mean()) if len(volume) else 0.0
    return level / mean if mean > 0 else 1.0


def noise(task_id: str, symbol: str, sd: float, days: int) -> np.ndarray:
    """[day, field] multipliers ``exp(sd * z)`` of open, high, low, close and volume on the dataset's first ``days``
    days, seeded by the episode's task and the symbol: a day's draw is the same in every window, so every tool
    reads one perturbed history (``EpisodeSettings.anonymize_noise``)."""
    seed = int.from_bytes(hashlib.sha256(f"{task_id}|{symbol}".encode()).digest()[:8], "little")
    return np.exp(sd * np.random.default_rng(seed).standard_normal((days, 5)))


def perturb(fields: dict[str, np.ndarray], multipliers: np.ndarray) -> dict[str, np.ndarray]:
    """Bars (open/high/low/close/volume arrays of one shape) times ``multipliers`` (that shape + 5 fields), the
    high and low widened to hold the open and close: the bar's shape and each day's change are no longer the
    real ones, so a lookup of exact returns (or a model that memorised them) finds no match."""
    opened, close = fields["open"] * multipliers[..., 0], fields["close"] * multipliers[..., 3]
    return fields | {
        "open": opened,
        "high": np.maximum(fields["high"] * multipliers[..., 1], np.maximum(opened, close)),
        "low": np.minimum(fields["low"] * multipliers[..., 2], np.minimum(opened, close)),
        "close": close,
        "volume": fields["volume"] * multipliers[..., 4],
    }


def hide_schemas(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas as every anonymized episode shows them: an alias as the example code, indices by name.

    They are the same for every episode, so a trainer whose tool config is one file for all rows (verl) can
    write these when its tasks are anonymized.
    """
    text = json.dumps(schemas, ensure_ascii=False).replace(EXAMPLE_SYMBOL, EXAMPLE_ALIAS)
    for plain, anonymized in UNITS_TEXT.items():
        text = text.replace(plain, anonymized)
    for code, name in INDEX_NAMES.items():  # "SH000300 沪深300" reads "沪深300指数", not "沪深300指数 沪深300"
        if alias := index_alias(code):
            text = text.replace(f"{code} {name}", alias)
    return json.loads(re.sub(_SYMBOL, lambda found: index_alias(found[0].upper()) or OTHER_SYMBOL, text, flags=re.I))


class Aliases(BaseModel):
    """One episode's mapping: real symbol -> alias, and each calendar date shown -> its relative day."""

    symbols: dict[str, str] = Field(description="pool, holdings and indices: real symbol -> alias")
    dates: dict[str, str] = Field(default_factory=dict, description="ISO date -> relative day, as shown so far")
    prices: dict[str, float] = Field(
        default_factory=dict, description="real symbol -> shown price / real price (T0 basis); absent: 1 (older files)"
    )
    volumes: dict[str, float] = Field(default_factory=dict, description="real symbol -> shown volume / real volume")

    @classmethod
    def draw(cls, task_id: str, stocks: list[str], view: PointInTimeView) -> Aliases:
        """Aliases and scales seeded by the task id alone, so the same task shows the same view wherever it is
        opened. The scales are drawn levels over T0's real ones, so a shown level says nothing of the real one."""
        seed = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        numbers = rng.permutation(np.arange(1, 1000))
        stocks = sorted(set(stocks))
        symbols = {s: f"{BOARD_PREFIX[board_of(s)]}{n:03d}" for s, n in zip(stocks, numbers, strict=False)}
        symbols |= {index: index_alias(index) or f"指数{k}" for k, index in enumerate(view.indices(), start=1)}
        levels = np.exp(rng.uniform(*np.log(PRICE_LEVELS), size=len(stocks))).round(2)
        volumes = np.exp(rng.uniform(*np.log(VOLUME_LEVELS), size=len(stocks)))
        prices = {s: float(level / view.last_close(s)) for s, level in zip(stocks, levels, strict=True)}
        shown = dict(zip(stocks, volumes, strict=True)) | dict.fromkeys(view.indices(), INDEX_VOLUME)
        return cls(symbols=symbols, prices=prices, volumes={s: _volume_scale(view, s, v) for s, v in shown.items()})

    def price(self, symbol: str) -> float:
        """Shown price / real price of ``symbol`` (per unit / per share, on T0's price basis)."""
        return self.prices.get(symbol, 1.0)

    def shares(self, units: int, symbol: str, *, sellable: int, rules: ExecutionRules) -> int:
        """The real shares an order of ``units`` trades: whole lots at most its value (STAR: 1-share steps from
        the minimum), or every sellable share when a sell names at least their whole units. Executing them is
        the plain episode's order for them, so fills, fees and the reward are the same."""
        exact = units * self.price(symbol)  # 1 unit = price-scale shares: units x shown price = shares x price
        if sellable and units >= int(sellable / self.price(symbol) + 1e-9):
            return sellable
        step = 1 if board_of(symbol) is Board.STAR else rules.lot_size
        return int(exact / step + 1e-9) * step

    def units(self, shares: int, symbol: str) -> int:
        """The fewest units worth ``shares`` real shares, :meth:`shares` the other way: an order of them trades
        exactly ``shares`` whole lots while a unit is at most a lot, and any STAR count while it is at most a
        share (a coarser unit names only some counts)."""
        return math.ceil(shares / self.price(symbol) - 1e-9)

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
