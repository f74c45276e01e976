"""Tool-call demonstrations for the tiny model's fine-tune: a baseline policy's days played through the Episode.

The quickstart teaches the tool-call protocol from real episodes rather than templates: each training task is
opened with its own prompt, the momentum baseline of trade-eval decides the day's target weights, and the day is
played one call per reply (the market, the prices of the stocks it trades, its two largest orders, stop), so every tool
result the model learns to read after is what our tools return, and every order is one the Episode accepted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from trade_data.store import MarketStore
from trade_eval.policies.baselines import Momentum, rebalance
from trade_eval.policy import RunSettings
from trade_reward.taskfolder import TaskRecord
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.execution import Refused, plan_order
from trade_tools.exploit import signal_ranking
from trade_train.tiny.scripted import Demonstration

INDEX = "SH000300"
MAX_ORDERS = 2
"""Orders a demonstration places (the baseline's largest): short days keep the fine-tune and the rollouts cheap."""
THINKING_SHARE = 1.0
"""Share of demonstrations with Qwen3's default (thinking) generation prompt. All of them: that is the layout TRL
and ``--policy local`` generate in, and with a quarter in the other layout the tiny model often began a call
without its ``<tool_call>`` (no valid call in every rollout: nothing for GRPO to compare)."""
HOLD_SHARE = 0.5
"""Share of days played by the hold baseline (look at the market, stop) rather than momentum: short days the tiny
model can finish, so some rollouts of a group stop and others do not, and GRPO has a difference to learn from."""


SIGNAL_BUY_SHARES = 1000
"""Shares of the one buy of a signal demonstration: the same number every day, so the tiny model learns the
choice of stock, not arithmetic (1,000 shares of a 2-300 CNY stock fit the 40% cap of the 1M CNY tasks)."""


def signal_demonstrations(
    store: MarketStore,
    records: Sequence[TaskRecord],
    signal: str,
    *,
    seed: int,
    top: bool = False,
    stop_with_orders: bool = False,
    walks_ranking: bool = False,
) -> list[Demonstration]:
    """One demonstration per task: the signal ranked on the pool with ``compute_alpha_factor``, then a buy of
    a stock drawn uniformly from the ranking (among those the Episode would fill), then stop; with
    ``stop_with_orders`` the buy and the stop are two calls of one reply, so a day is two replies and the buy's
    fill text is never read again (a third fewer tokens a day for a pretrained base on CPU). With ``walks_ranking``
    the buy's reply first copies the ranking's lines from the top down to the one it buys (``1. SZ300008``,
    ``2. SZ000006``, ...): copying a list on from where it starts is what a pretrained model does well, the code
    it orders is the line it just wrote, and the choice is where it stops, a decision after line k that reads the
    same every day, which GRPO can move.

    Every choice is shown equally often, so the fine-tuned model knows how to act on the ranking but not which
    rank pays: the untrained exploit share is about 1/pool, and what GRPO adds to it is what it learned.
    ``top``: the buy is always the top fillable stock, the rule itself (the supervised bound of
    ``scripts/copy_bound.py``: can the model learn it from labelled days at all?)."""
    rng = np.random.default_rng(seed)
    demonstrations = []
    for record in records:
        day = TradingDay(Episode.start(record.task, store), record.prompt)
        episode = day.episode
        ranking = signal_ranking(episode.view, signal, episode.task.pool)  # the tool's lines, in its order
        fillable = [s for s in ranking if _fills(episode, s)]
        symbol = fillable[0 if top else int(rng.integers(len(fillable)))] if fillable else None
        walked = ""
        if walks_ranking and symbol is not None:
            walk = ranking[: ranking.index(symbol) + 1]
            walked = "\n".join(f"{line}. {episode.hide(code)}" for line, code in enumerate(walk, 1))
        day.turn("", [("compute_alpha_factor", json.dumps({"expression": signal}))])  # the whole pool
        orders = []
        if symbol is not None:
            amount = episode.units_for(symbol, SIGNAL_BUY_SHARES)
            order = {"type": "buy", "symbol": episode.hide(symbol), "amount": amount}
            orders.append(("TakeAction", json.dumps(order, ensure_ascii=False)))
        stop = ("TakeAction", json.dumps({"type": "stop"}))
        for calls in [[*orders, stop]] if stop_with_orders else [*([call] for call in orders), [stop]]:
            day.turn(walked if calls[0] in orders else "", calls)
        messages = [message.model_dump(exclude_none=True) for message in day.messages]
        demonstrations.append(Demonstration(episode.tool_schemas(), messages, thinking=True))
    return demonstrations


def _fills(episode: Episode, symbol: str) -> bool:
    """Whether the Episode would fill a buy of :data:`SIGNAL_BUY_SHARES` of ``symbol`` now, typed as a number of
    units when anonymized (a STAR unit of several shares may name no count of exactly that many)."""
    if episode.shares_for("buy", symbol, episode.units_for(symbol, SIGNAL_BUY_SHARES)) != SIGNAL_BUY_SHARES:
        return False
    try:
        plan_order(
            "buy",
            symbol,
            SIGNAL_BUY_SHARES,
            view=episode.view,
            cash=episode.cash,
            positions=episode.positions,
            rules=episode.rules,
            value_before=episode.value_before,
        )
    except Refused:
        return False
    return True


def baseline_demonstrations(store: MarketStore, records: Sequence[TaskRecord], *, seed: int) -> list[Demonstration]:
    """One demonstration per task record: its day played by the momentum baseline, one call per reply."""
    rng = np.random.default_rng(seed)
    policy, settings = Momentum(), RunSettings(seed=seed)
    demonstrations = []
    for record in records:
        day = TradingDay(Episode.start(record.task, store), record.prompt)
        holds = bool(rng.random() < HOLD_SHARE)
        for name, arguments in _calls(day.episode, policy, settings, holds=holds):
            day.turn("", [(name, arguments)])
        messages = [message.model_dump(exclude_none=True) for message in day.messages]
        thinking = bool(rng.random() < THINKING_SHARE)
        demonstrations.append(Demonstration(day.episode.tool_schemas(), messages, thinking=thinking))
    return demonstrations


def _calls(episode: Episode, policy: Momentum, settings: RunSettings, *, holds: bool) -> list[tuple[str, str]]:
    """Look (the index, the price of each stock ordered), act (momentum's orders, or none to hold), then stop."""
    orders = [] if holds else rebalance(episode, policy.weights(episode, settings) or {}, policy.reasoning)[:MAX_ORDERS]
    traded = list(dict.fromkeys(json.loads(arguments)["symbol"] for _, arguments in orders))
    looks: list[tuple[str, dict[str, Any]]] = [("get_macro_indicators", {"index": INDEX})]
    looks += [("get_price_data", {"symbol": symbol}) for symbol in traded]
    stop = ("TakeAction", json.dumps({"type": "stop", "reasoning": policy.reasoning}, ensure_ascii=False))
    return [(name, json.dumps(arguments, ensure_ascii=False)) for name, arguments in looks] + orders + [stop]
