"""An anonymized episode's reward is the reward of the same real orders in the plain episode (issue 25): the model
orders in units of each stock's shown scale, the Episode trades the real whole lots they are worth, and the
score reads only real cash and shares."""

from __future__ import annotations

import numpy as np

from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_reward.outcome import outcome
from trade_reward.schemes import get_scheme
from trade_tools.episode import Episode
from trade_tools.sampler import day_task


def test_the_same_real_orders_score_the_same_in_both_modes(sample_store: MarketStore) -> None:
    rng = np.random.default_rng(11)
    days = rng.choice(np.arange(30, len(sample_store.dates) - 5), size=30, replace=False)
    traded = 0
    for t in days:
        task = day_task(sample_store, sample_store.dates[t].astype(object), pool_size=10, seed=int(t))
        anonymized = Episode.start(task.model_copy(update={"anonymized": True}), sample_store)
        plain = Episode.start(task, sample_store)
        alias = anonymized.aliases.symbols  # type: ignore[union-attr]
        for _ in range(8):
            held = sorted(anonymized.positions)
            side = "sell" if held and rng.random() < 0.4 else "buy"
            symbol = str(rng.choice(held if side == "sell" else task.pool))
            shown = anonymized.view.last_close(symbol) * anonymized.price_scale(symbol)
            units = (
                anonymized.positions[symbol].sellable / anonymized.price_scale(symbol) * rng.uniform(0.2, 1.2)
                if side == "sell"
                else anonymized.cash * rng.uniform(0.01, 0.5) / shown
            )
            anonymized.call("TakeAction", {"type": side, "symbol": alias[symbol], "amount": max(1, int(units))})
            if (fill := anonymized.actions[-1].fill) is not None:
                traded += 1
                plain.call("TakeAction", {"type": side, "symbol": symbol, "amount": fill.shares})
        for episode in (anonymized, plain):
            episode.call("TakeAction", {"type": "stop", "reasoning": "done"})
        truth = ground_truth(sample_store, task.date, sorted({*task.pool, *task.holdings}))
        for scheme in ("continuous", "bucketed"):
            scores = [get_scheme(scheme).score(outcome(e, truth)) for e in (anonymized, plain)]
            assert scores[0] == scores[1], (task.task_id, scheme)
    assert traded > 60
