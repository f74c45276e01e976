"""Build a one-day Task by hand or by seeded sampling (for the CLI; the dataset builder comes later)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_tools.episode import Task


def parse_holdings(text: str | None) -> dict[str, int]:
    """'SH600519=100,SZ000001=2000' -> {symbol: shares}."""
    holdings: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        symbol, sep, shares = part.partition("=")
        if not sep or not shares.strip().isdigit():
            raise TradeError(f"holding {part!r} is not SYMBOL=SHARES", hint="e.g. --holdings SH600519=100")
        holdings[symbol.strip().upper()] = int(shares)
    return holdings


def day_task(
    store: MarketStore,
    date: str | dt.date,
    *,
    pool: list[str] | None = None,
    holdings: dict[str, int] | None = None,
    cash: float = 1_000_000.0,
    pool_size: int = 20,
    universe: str = "csi300",
    seed: int = 0,
) -> Task:
    """A task for ``date``: the given pool or a seeded sample of the universe's stocks trading that day.

    Without ``holdings``, three pool stocks are held, about 10% of ``cash`` each, in whole lots. An unknown
    ``universe`` is refused, pool given or not: the prompts name it.
    """
    if not math.isfinite(cash) or cash < 0:
        raise TradeError(f"--cash {cash} is not an amount >= 0", hint="e.g. --cash 1000000")
    view = store.asof(date)
    members = view.members(universe)
    rng = np.random.default_rng(seed)
    if pool is None:
        tradable = [s for s in members if not view.is_suspended(s) and not s.startswith("SH000")]
        if not tradable:
            raise TradeError(f"no {universe} stock traded on {view.date}")
        pool = sorted(rng.choice(tradable, size=min(pool_size, len(tradable)), replace=False).tolist())
    pool = [s.strip().upper() for s in pool if s.strip()]
    if not pool:
        raise TradeError("the stock pool is empty", hint="e.g. --pool SH600519,SZ000001")
    if holdings is None:
        holdings = {}
        for symbol in rng.choice(pool, size=min(3, len(pool)), replace=False):
            lots = int(cash * 0.1 // (view.last_close(str(symbol)) * 100))
            if lots:
                holdings[str(symbol)] = lots * 100
    return Task(
        task_id=f"{view.date}-{seed}", date=view.date, pool=pool, holdings=holdings, cash=cash, universe=universe
    )
