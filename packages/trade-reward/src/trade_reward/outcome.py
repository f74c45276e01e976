"""r_outcome: how much better the agent's final portfolio does than holding the original one.

``R(p) = sum_k w_k * (V_p(T+k) / V0 - 1)`` with ``V_p(T+k) = cash + sum shares * close_T0 * growth_k``
(adjusted growth, so ex-dividend days are no fake drops; a suspended day keeps the last close).
``V0`` is the original portfolio's value at the T0 close for both portfolios, so the fees, stamp duty
and slippage the agent paid count against it. ``r_outcome = R(final) - R(original)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from trade_core.errors import TradeError
from trade_reward.forward import GroundTruth
from trade_tools.episode import Episode

DEFAULT_WEIGHTS = (0.5, 0.3, 0.2)


class Outcome(BaseModel):
    """The inputs every reward scheme scores."""

    r_new: float
    r_orig: float
    r_outcome: float
    status: str
    valid_calls: int
    stopped: bool
    path_new: list[float] = Field(default_factory=list, description="V(T+k)/V0 - 1 of the final portfolio, k = 1..K")
    path_orig: list[float] = Field(default_factory=list, description="the same for the original portfolio")


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


def outcome(episode: Episode, truth: GroundTruth, weights: Sequence[float] = DEFAULT_WEIGHTS) -> Outcome:
    """Score the episode's final portfolio against holding its original one."""
    if truth.date != episode.task.date:
        raise TradeError(f"ground truth is for {truth.date}, the episode for {episode.task.date}")
    base = episode.value_before
    if base <= 0:
        raise TradeError(f"task {episode.task.task_id} starts with no capital", hint="give it cash or holdings")
    path_orig = portfolio_path(episode.task.cash, episode.task.holdings, truth, base)
    path_new = portfolio_path(episode.cash, episode.final_holdings(), truth, base)
    r_orig, r_new = weighted(path_orig, weights), weighted(path_new, weights)
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
