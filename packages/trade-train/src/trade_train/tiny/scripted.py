"""A seeded scripted policy that plays trading days through our Episode: tool-call demonstrations to learn from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trade_data.store import MarketStore
from trade_tools.day import TradingDay
from trade_tools.episode import Episode
from trade_tools.sampler import day_task


@dataclass(frozen=True)
class Demonstration:
    """One trading day played by a scripted policy: the opening messages, the tools, and the calls with results."""

    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    thinking: bool  # Qwen3's default generation prompt, or the one of ``enable_thinking=False``


def tool_call_demonstrations(data: Path, count: int, *, seed: int = 0) -> list[Demonstration]:
    """Days on ``data`` played through :class:`~trade_tools.episode.Episode` with a seeded scripted policy.

    The tool results are the real texts our tools return, and the calls follow the workflow the system prompt
    asks for (market, prices, a factor, a trade, stop), with the argument shapes kept consistent so a tiny model
    can learn them in a few hundred steps.
    """
    store = MarketStore.load(data)
    rng = np.random.default_rng(seed)
    days = store.calendar[min(120, len(store.calendar) // 2) :]
    universe = "csi300" if "csi300" in store.universe_names else "all"  # the training mix where the data has it
    demonstrations = []
    for index in range(count):
        day = str(days[int(rng.integers(len(days)))].date())
        task = day_task(store, day, pool_size=int(rng.integers(5, 11)), seed=seed * 10_000 + index, universe=universe)
        day = TradingDay.start(task, store)
        for name, arguments in _scripted_calls(day.episode, rng):
            day.turn("", [(name, json.dumps(arguments, ensure_ascii=False))])
        messages = [message.model_dump(exclude_none=True) for message in day.messages]
        # Mostly thinking on: there the call follows "assistant\n", a newline like the one inside every call,
        # which the model tells apart only with enough examples; after the pre-filled "</think>\n\n" it is easy.
        demonstrations.append(Demonstration(day.episode.tool_schemas(), messages, thinking=bool(rng.random() < 0.75)))
    return demonstrations


def _scripted_calls(episode: Episode, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """Macro, one or two prices, sometimes a factor, sometimes a one-lot trade, then stop."""
    pool = list(episode.task.pool)
    picked = [str(s) for s in rng.choice(pool, size=min(len(pool), int(rng.integers(1, 3))), replace=False)]
    calls: list[tuple[str, dict[str, Any]]] = [("get_macro_indicators", {"index": "SH000300"})]
    calls += [("get_price_data", {"symbol": symbol}) for symbol in picked]
    if rng.random() < 0.5:
        ranked = sorted(str(s) for s in rng.choice(pool, size=min(len(pool), 3), replace=False))
        calls.append(
            ("compute_alpha_factor", {"expression": str(rng.choice(["ROC20", "KMID", "RSQR60"])), "symbols": ranked})
        )
    held = sorted(episode.positions)
    if held and rng.random() < 0.4:
        symbol = str(rng.choice(held))
        calls.append(("TakeAction", {"type": "sell", "symbol": symbol, "amount": 100, "reasoning": "趋势转弱，减仓"}))
    elif rng.random() < 0.7:
        calls.append(
            ("TakeAction", {"type": "buy", "symbol": picked[0], "amount": 100, "reasoning": "走势偏强，小幅买入"})
        )
    calls.append(("TakeAction", {"type": "stop", "reasoning": "完成分析，结束今日交易"}))
    return calls
