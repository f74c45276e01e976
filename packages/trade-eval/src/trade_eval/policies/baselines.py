"""The baselines every backtest is compared with: rules that trade through the Episode's tools like a model.

Each baseline turns the day into target weights of the portfolio's value at the T0 close, and
:func:`rebalance` turns those into ``TakeAction`` orders the Episode accepts: sells before buys, whole lots
(STAR: 200 shares, then 1-share steps), at most ``max_actions`` orders (the largest first), no stock above
``max_position_weight``, no buy the cash cannot pay, nothing suspended or at its price limit, and no order
for a deviation under one lot. The orders go in one reply ending with ``stop``, so a baseline pays the same
fills and fees as a model would, and its day is recorded the same way. Orders are sized in real shares; an
anonymized episode reads amounts as units, so they are typed as the units worth them (``Episode.units_for``).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_eval.policy import DayUsage, Policy, RunSettings
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.execution import Refused, apply_fill, plan_order
from trade_tools.exploit import buyable_ranking
from trade_tools.portfolio import Fill, Position
from trade_tools.sampler import MAX_HOLDINGS, WEIGHT_RANGE, task_rng

MOMENTUM_TOP = 5
MOMENTUM_DAYS = 20
RANDOM_DRAW = 1
"""The draw index of the random baseline's generator (draw 0 of the first day picks the run's pool)."""


def _order(episode: Episode, side: str, symbol: str, shares: int, reasoning: str) -> tuple[str, str]:
    """A TakeAction call for ``shares`` real shares, naming the stock and the amount as the model would (its
    alias and units in an anonymized episode)."""
    amount = episode.units_for(symbol, shares)
    arguments = {"type": side, "symbol": episode.hide(symbol), "amount": amount, "reasoning": reasoning}
    return "TakeAction", json.dumps(arguments, ensure_ascii=False)


def _orderable(symbol: str, shares: int, episode: Episode) -> int:
    """``shares`` rounded down to what one order may trade: whole lots (STAR: any count from its minimum)."""
    rules = episode.rules
    if board_of(symbol) is Board.STAR:
        return shares if shares >= rules.star_min_shares else 0
    return shares // rules.lot_size * rules.lot_size


def _target_shares(episode: Episode, weights: Mapping[str, float]) -> dict[str, int]:
    """Shares of each weighted stock worth its weight of the T0 value (capped at the largest weight)."""
    cap = episode.rules.max_position_weight or 1.0
    view = episode.view
    return {
        symbol: _orderable(symbol, int(min(weight, cap) * episode.value_before / view.last_close(symbol)), episode)
        for symbol, weight in weights.items()
        if weight > 0
    }


def rebalance(episode: Episode, weights: Mapping[str, float], reasoning: str) -> list[tuple[str, str]]:
    """``TakeAction`` calls that move the portfolio toward ``weights`` (fractions of the T0 value; unnamed
    stocks: 0), every one of which the Episode will accept, sells first.

    Orders are sized and checked with the Episode's own execution rules on a copy of its cash and
    positions, so a rule change applies to the baselines too and none of their orders is refused.
    """
    targets = _target_shares(episode, weights)
    wanted: list[tuple[str, str, int]] = []
    for symbol in sorted({*targets, *episode.positions}):
        held = episode.positions.get(symbol)
        shares = held.shares if held else 0
        target = targets.get(symbol, 0)
        if target < shares:
            amount = held.sellable if target == 0 else _orderable(symbol, shares - target, episode)
            wanted.append(("sell", symbol, min(amount, held.sellable)))
        elif target > shares:
            wanted.append(("buy", symbol, _orderable(symbol, target - shares, episode)))
    view = episode.view
    wanted = [order for order in wanted if order[2] > 0]
    wanted.sort(key=lambda order: -order[2] * view.last_close(order[1]))  # the largest deviations first
    wanted = wanted[: episode.rules.max_actions]
    wanted.sort(key=lambda order: order[0] != "sell")  # stable: sells first, each side largest first
    cash, positions = episode.cash, dict(episode.positions)
    calls = []
    for side, symbol, amount in wanted:
        fill = _fill(episode, side, symbol, amount, cash, positions)
        if fill is not None:
            cash = apply_fill(fill, cash, positions)
            calls.append(_order(episode, side, symbol, fill.shares, reasoning))
    return calls


def _fill(
    episode: Episode, side: str, symbol: str, amount: int, cash: float, positions: dict[str, Position]
) -> Fill | None:
    """The fill of the order, a buy cut to what ``cash`` pays for, or None when the Episode would refuse it.
    In an anonymized episode the order is cut to a count whole units trade (a unit may be more than a share)."""
    rules = episode.rules
    if side == "buy":
        price = episode.view.last_close(symbol) * (1 + rules.slippage)
        per_share = price * (1 + rules.commission_rate + rules.transfer_fee_rate)
        amount = min(amount, _orderable(symbol, int(max(cash - rules.min_commission, 0) / per_share), episode))
    while amount > 0:
        if episode.shares_for(side, symbol, episode.units_for(symbol, amount)) == amount:
            try:
                return plan_order(
                    side,
                    symbol,
                    amount,
                    view=episode.view,
                    cash=cash,
                    positions=positions,
                    rules=rules,
                    value_before=episode.value_before,
                )
            except Refused:
                if side == "sell":
                    return None
        amount = _orderable(symbol, amount - 1, episode)  # a minimum commission can still tip it over
    return None


class _TargetWeights(Policy):
    """A baseline that rebalances to target weights each day and stops."""

    reads_prompt = False
    reasoning = ""
    """What the orders and the stop say (Chinese: it is in the trajectory beside a model's)."""

    @abstractmethod
    def weights(self, episode: Episode, settings: RunSettings) -> Mapping[str, float] | None:
        """Today's target weights, or None to trade nothing."""

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        weights = self.weights(day.episode, settings)
        calls = [] if weights is None else rebalance(day.episode, weights, self.reasoning)
        day.turn("", [*calls, ("TakeAction", json.dumps({"type": "stop", "reasoning": self.reasoning}))])
        return DayUsage()


def _equal(symbols: list[str]) -> dict[str, float]:
    return {symbol: 1 / len(symbols) for symbol in symbols}


class Hold(_TargetWeights):
    """Buy and hold: on a day holding no stock (the first), buy the day's pool in equal weights; then never
    trade. Dividends and bonus shares arrive as cash (the backtest's corporate-action rule)."""

    name = "hold"
    description = "keep what is held; holding no stock (a backtest's first day), buy the pool in equal weights"
    reasoning = "持有基线：首日等权买入股票池，之后不再交易"

    def weights(self, episode: Episode, settings: RunSettings) -> Mapping[str, float] | None:
        return None if episode.positions else _equal(episode.task.pool)


class EqualWeight(_TargetWeights):
    """Equal weights of the T0 value in every stock of the day's pool, rebalanced every day; held stocks
    that left the pool are sold."""

    name = "equal-weight"
    description = "equal weights in the day's pool, rebalanced daily"
    reasoning = "等权基线：每日按股票池等权再平衡"

    def weights(self, episode: Episode, settings: RunSettings) -> Mapping[str, float] | None:
        return _equal(episode.task.pool)


class Momentum(_TargetWeights):
    """Equal weights in the 5 pool stocks with the highest 20-day return on adjusted closes (the last 21
    traded closes up to T0; stocks with fewer are left out; ties by symbol), rebalanced every day."""

    name = "momentum"
    description = f"equal weights in the top {MOMENTUM_TOP} pool stocks by {MOMENTUM_DAYS}-day return, daily"
    reasoning = f"动量基线：每日等权持有{MOMENTUM_DAYS}日涨幅最高的{MOMENTUM_TOP}只股票"

    def weights(self, episode: Episode, settings: RunSettings) -> Mapping[str, float] | None:
        gains = {}
        for symbol in episode.task.pool:
            close = episode.view.window(symbol, MOMENTUM_DAYS + 1).close
            if len(close) == MOMENTUM_DAYS + 1:
                gains[symbol] = close[-1] / close[0] - 1
        top = sorted(gains, key=lambda s: (-gains[s], s))[:MOMENTUM_TOP]
        return _equal(top) if top else {}


class Random(_TargetWeights):
    """Each day a random portfolio, drawn from the seed and the date only: 0..5 pool stocks, each a uniform
    5-20% of the T0 value (the training tasks' starting portfolios), the rest in cash."""

    name = "random"
    description = "a seeded random portfolio of 0-5 pool stocks each day"
    reasoning = "随机基线：每日随机持有0至5只股票"

    def weights(self, episode: Episode, settings: RunSettings) -> Mapping[str, float] | None:
        rng = task_rng(settings.seed, episode.task.date, RANDOM_DRAW)
        pool = sorted(episode.task.pool)
        count = int(rng.integers(0, min(MAX_HOLDINGS, len(pool)) + 1))
        chosen = rng.choice(pool, size=count, replace=False).tolist()
        return dict(zip(chosen, rng.uniform(*WEIGHT_RANGE, size=count).tolist(), strict=True))


class OracleSignal(_TargetWeights):
    """The ceiling of a market with a planted signal: read the signal through ``compute_alpha_factor`` on the
    day's pool, then hold its top stock at the largest weight a stock may have (the rest in cash), daily.

    The signal is ``options.signal`` (``--set signal=KMID``), by default the dataset's planted one."""

    name = "oracle-signal"
    description = "reads the planted signal with compute_alpha_factor, holds its top pool stock at the 40% cap"
    reasoning = "信号基线：按因子排名持有股票池第一名"

    def for_data(self, settings: RunSettings, store: MarketStore) -> RunSettings:
        """``options.signal`` defaults to the dataset's planted signal."""
        if not settings.options.get("signal") and store.planted_signal:
            settings = settings.model_copy(update={"options": {**settings.options, "signal": store.planted_signal}})
        self._require_signal(settings)
        return settings

    def _require_signal(self, settings: RunSettings) -> None:
        if not settings.options.get("signal"):
            raise TradeError(
                "policy 'oracle-signal' needs a signal",
                hint="use data with a planted signal (trade data synth --signal KMID:0.2) or pass --set signal=KMID",
            )

    def weights(self, episode: Episode, settings: RunSettings) -> Mapping[str, float] | None:
        ranking = buyable_ranking(episode.view, settings.options["signal"], episode.task.pool)
        return {ranking[0]: episode.rules.max_position_weight or 1.0} if ranking else {}

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        self._require_signal(settings)
        day.turn("", [("compute_alpha_factor", json.dumps({"expression": settings.options["signal"]}))])
        return await super().play(day, settings)


BASELINES: tuple[type[Policy], ...] = (Hold, EqualWeight, Momentum, Random, OracleSignal)
