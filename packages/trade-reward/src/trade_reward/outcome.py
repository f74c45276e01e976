"""r_outcome: how much better the agent's final portfolio does than holding the original one.

``R(p) = sum_k w_k * (V_p(T+k) / V0 - 1)`` with ``V_p(T+k) = cash + sum shares * close_T0 * growth_k``
(adjusted growth, so ex-dividend days are no fake drops; a suspended day keeps the last close).
``V0`` is the original portfolio's value at the T0 close for both portfolios, so the fees, stamp duty
and slippage the agent paid count against it. ``r_outcome = R(final) - R(original)``.

A NaN passes no comparison, so it would land in whichever bucket a scheme tests last: numbers that are
not finite, or cannot be (a price, growth or V0 <= 0, cash or shares outside the bounds of
:mod:`trade_tools.portfolio`), make an outcome that every scheme scores as the failure ``invalid_outcome``
instead.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from trade_core.errors import TradeError
from trade_tools.grading import GroundTruth
from trade_tools.portfolio import MAX_CASH, MAX_SHARES

if TYPE_CHECKING:
    from trade_tools.episode import Episode

DEFAULT_WEIGHTS = (0.5, 0.3, 0.2)
INVALID = "invalid_outcome"
"""Failure: a number the reward reads is not finite or impossible."""
MALFORMED = "malformed"
"""Failure: the episode or its ground truth cannot be read, or they do not belong together."""


class Outcome(BaseModel):
    """The inputs every reward scheme scores; its numbers are always finite."""

    model_config = ConfigDict(allow_inf_nan=False)

    r_new: float
    r_orig: float
    r_outcome: float
    status: str
    valid_calls: int
    stopped: bool
    path_new: list[float] = Field(default_factory=list, description="V(T+k)/V0 - 1 of the final portfolio, k = 1..K")
    path_orig: list[float] = Field(default_factory=list, description="the same for the original portfolio")
    invalid: str | None = Field(None, description=f"{INVALID} or {MALFORMED} when it could not be computed")

    @classmethod
    def unscorable(cls, reason: str, episode: Episode | None = None) -> Outcome:
        """An outcome that scores as the failure ``reason``; its returns are 0 so that batch means stay finite."""
        status, valid_calls = (episode.status, episode.tool_calls - episode.tool_errors) if episode else ("", 0)
        return cls(
            r_new=0.0,
            r_orig=0.0,
            r_outcome=0.0,
            status=status,
            valid_calls=valid_calls,
            stopped=status == "stopped",
            invalid=reason,
        )


def portfolio_path(cash: float, shares: Mapping[str, int], truth: GroundTruth, base: float) -> list[float]:
    """``V(T+k) / base - 1`` for each horizon k of a portfolio held from the T0 close."""
    path = []
    for k in range(len(truth.horizon_dates)):
        value = cash
        for symbol, count in shares.items():
            if symbol not in truth.growth:
                raise TradeError(f"ground truth has no forward prices for {symbol}")
            value += count * truth.close[symbol] * truth.growth[symbol][k]
        path.append(value / base - 1.0)
    return path


def weighted(path: Sequence[float], weights: Sequence[float]) -> float:
    """R = sum_k w_k * path_k."""
    if len(weights) != len(path):
        raise TradeError(f"{len(weights)} weights for {len(path)} horizons")
    return sum(w * r for w, r in zip(weights, path, strict=True))


def _possible(episode: Episode, truth: GroundTruth) -> bool:
    """Whether every number the reward reads is possible: prices, growth and V0 finite and > 0, cash and shares
    within the portfolio bounds (which reading an Episode checks; one built in memory is checked here)."""
    positive = [episode.value_before, *truth.close.values(), *itertools.chain.from_iterable(truth.growth.values())]
    shares = [*episode.task.holdings.values(), *(p.shares for p in episode.positions.values())]
    return (
        all(0 < x < math.inf for x in positive)
        and all(0 <= n <= MAX_SHARES for n in shares)
        and all(0 <= cash <= MAX_CASH for cash in (episode.cash, episode.task.cash))
    )


def outcome(episode: Episode, truth: GroundTruth, weights: Sequence[float] = DEFAULT_WEIGHTS) -> Outcome:
    """Score the episode's final portfolio against holding its original one.

    A ground truth for another day or without a held stock is a TradeError; a bad number, read or
    computed (an overflow), gives the failure outcome ``invalid_outcome``.
    """
    if truth.date != episode.task.date:
        raise TradeError(f"ground truth is for {truth.date}, the episode for {episode.task.date}")
    if not _possible(episode, truth):
        return Outcome.unscorable(INVALID, episode)
    base = episode.value_before
    path_orig = portfolio_path(episode.task.cash, episode.task.holdings, truth, base)
    path_new = portfolio_path(episode.cash, episode.final_holdings(), truth, base)
    r_orig, r_new = weighted(path_orig, weights), weighted(path_new, weights)
    if not all(map(math.isfinite, [*path_orig, *path_new, r_orig, r_new, r_new - r_orig])):
        return Outcome.unscorable(INVALID, episode)
    return Outcome(
        r_new=r_new,
        r_orig=r_orig,
        r_outcome=r_new - r_orig,
        status=episode.status,
        valid_calls=episode.tool_calls - episode.tool_errors,
        stopped=episode.status == "stopped",
        path_new=path_new,
        path_orig=path_orig,
    )
