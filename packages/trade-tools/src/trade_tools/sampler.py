"""The one task sampler: training (``trade data tasks``), ``trade tools play`` and ``trade model tiny`` draw days alike.

A task is one trading day T0 and one seeded draw: a pool of universe members that traded at T0, a starting
portfolio of pool stocks bought at the previous close, and cash. Starting portfolio (documented so rewards can
be read against it): a capital of 1,000,000 CNY; 0..5 holdings (uniform, at most the pool size) of stocks that
traded before T0; each takes a uniform 5-20% of the capital in whole lots at the previous close (at least one
minimum order, STAR 200 shares, if that costs at most 20%; otherwise not held); cash is the rest, so it is never
negative. Draws are seeded by (seed, T0, k), so a day's task does not depend on which other days are drawn.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from trade_core.errors import TradeError
from trade_data.store import MarketStore, PointInTimeView
from trade_data.symbols import Board, board_of
from trade_tools.episode import Task
from trade_tools.portfolio import MAX_CASH, MAX_SHARES
from trade_tools.rules import ExecutionRules
from trade_tools.text import shown

CAPITAL = 1_000_000.0
MAX_HOLDINGS = 5
WEIGHT_RANGE = (0.05, 0.20)
"""Share of the capital per holding; MAX_HOLDINGS x the upper bound <= 1 keeps cash >= 0."""


def parse_holdings(text: str | None) -> dict[str, int]:
    """'SH600519=100,SZ000001=2000' -> {symbol: shares}."""
    holdings: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        symbol, sep, shares = part.partition("=")
        if not sep or not shares.strip().isdigit():
            raise TradeError(f"holding {part!r} is not SYMBOL=SHARES", hint="e.g. --holdings SH600519=100")
        if len(shares.strip()) > len(str(MAX_SHARES)) or int(shares) > MAX_SHARES:  # int() refuses 4,300 digits
            raise TradeError(f"holding {shown(part)!r} is more than {MAX_SHARES:,} shares, the most a portfolio holds")
        holdings[symbol.strip().upper()] = int(shares)
    return holdings


def task_rng(seed: int, day: dt.date, k: int = 0) -> np.random.Generator:
    """The generator of draw ``k`` on ``day``."""
    return np.random.default_rng([seed, day.toordinal(), k])


def tradable(view: PointInTimeView, universe: str) -> list[str]:
    """Stocks in the universe at T0 that traded that day (a pool needs T0 prices)."""
    return [s for s in view.members(universe) if board_of(s) is not Board.INDEX and not view.is_suspended(s)]


def whole_lots(budget: float, price: float, symbol: str, rules: ExecutionRules, capital: float = CAPITAL) -> int:
    """Shares for ``budget`` in lots, at least one minimum order if that stays within the largest weight."""
    minimum = rules.star_min_shares if board_of(symbol) is Board.STAR else rules.lot_size
    shares = int(budget // (price * rules.lot_size)) * rules.lot_size
    if shares >= minimum:
        return shares
    return minimum if minimum * price <= WEIGHT_RANGE[1] * capital else 0


def draw_holdings(
    view: PointInTimeView, pool: list[str], rng: np.random.Generator, rules: ExecutionRules, capital: float = CAPITAL
) -> tuple[dict[str, int], dict[str, float]]:
    """(shares, cost basis) of 0..MAX_HOLDINGS pool stocks, each WEIGHT_RANGE of the capital."""
    prices = {s: p for s in pool if (p := view.previous_close(s)) is not None}
    count = int(rng.integers(0, min(MAX_HOLDINGS, len(prices)) + 1))
    chosen = sorted(rng.choice(sorted(prices), size=count, replace=False).tolist())
    weights = rng.uniform(*WEIGHT_RANGE, size=count)
    holdings, cost = {}, {}
    for symbol, weight in zip(chosen, weights, strict=True):
        shares = whole_lots(weight * capital, prices[symbol], symbol, rules, capital)
        if shares:
            holdings[symbol], cost[symbol] = shares, prices[symbol]
    return holdings, cost


def draw_pool(view: PointInTimeView, universe: str, pool_size: tuple[int, int], rng: np.random.Generator) -> list[str]:
    """A uniform MIN..MAX pool of the universe's stocks trading at T0 (fewer if fewer trade)."""
    candidates = tradable(view, universe)
    size = min(int(rng.integers(pool_size[0], pool_size[1] + 1)), len(candidates))
    return sorted(rng.choice(candidates, size=size, replace=False).tolist()) if size else []


def draw_portfolio(
    view: PointInTimeView, pool: list[str], rng: np.random.Generator, capital: float = CAPITAL
) -> tuple[dict[str, int], dict[str, float], float]:
    """(shares, cost basis, cash): holdings drawn from the pool and bought out of ``capital``, the rest in cash."""
    holdings, cost = draw_holdings(view, pool, rng, ExecutionRules(), capital)
    return holdings, cost, round(capital - sum(shares * cost[s] for s, shares in holdings.items()), 2)


def draw_task(
    view: PointInTimeView, task_id: str, rng: np.random.Generator, universe: str, pool_size: tuple[int, int]
) -> Task | None:
    """One seeded sample for T0; None when no universe stock traded that day."""
    pool = draw_pool(view, universe, pool_size, rng)
    if not pool:
        return None
    holdings, cost, cash = draw_portfolio(view, pool, rng)
    return Task(
        task_id=task_id, date=view.date, pool=pool, holdings=holdings, cost_basis=cost, cash=cash, universe=universe
    )


def day_task(
    store: MarketStore,
    date: str | dt.date,
    *,
    pool: list[str] | None = None,
    holdings: dict[str, int] | None = None,
    cash: float = CAPITAL,
    pool_size: int = 20,
    universe: str = "csi300",
    seed: int = 0,
) -> Task:
    """The task training draws for ``date`` and ``seed`` (draw 0), with ``pool_size`` stocks and ``cash`` as the
    capital. A given ``pool`` replaces the drawn one; given ``holdings`` replace the drawn ones, on top of ``cash``.

    An unknown ``universe`` is refused, pool given or not: the prompts name it.
    """
    if not 0 <= cash <= MAX_CASH:  # NaN too
        raise TradeError(f"--cash {cash} is not between 0 and {MAX_CASH:,.0f} CNY", hint="e.g. --cash 1000000")
    view = store.asof(date)
    rng = task_rng(seed, view.date)
    if pool is None:
        pool = draw_pool(view, universe, (pool_size, pool_size), rng)
        if not pool:
            raise TradeError(f"no {universe} stock traded on {view.date}")
    else:
        view.members(universe)  # refuses an unknown universe
        pool = [s.strip().upper() for s in pool if s.strip()]
        if not pool:
            raise TradeError("the stock pool is empty", hint="e.g. --pool SH600519,SZ000001")
    cost: dict[str, float] = {}
    if holdings is None:
        holdings, cost, cash = draw_portfolio(view, pool, rng, cash)
    return Task(
        task_id=f"{view.date}-{seed}",
        date=view.date,
        pool=pool,
        holdings=holdings,
        cost_basis=cost,
        cash=cash,
        universe=universe,
    )
