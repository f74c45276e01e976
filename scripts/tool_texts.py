"""Every text an episode shows, for many random days of a dataset, as JSON lines: to diff two versions of the code.

    python scripts/tool_texts.py DATASET [--days 200] [--seed 0] > texts.jsonl

Each day is the task training draws (20 stocks, holdings, cash), played plain and anonymized (with and without
the bars' noise): the prompts (system and user: rules, market summary, state), then every tool on it:
``get_price_data`` with every indicator over 5, 20 and 120 days for each pool stock and holding,
``get_macro_indicators`` for each index, ``compute_alpha_factor`` for a few Alpha158 factors and an expression, and
a buy and a sell through ``TakeAction``. A change to how data is stored or computed (the store's arrays, the
indicator states) should leave the output byte-identical: run it on the code before and after and compare with
``cmp`` (the first line names the dataset and the count: compare from the second).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

FACTORS = ("ROC20", "KMID", "RSQR60", "CORR20", "Mean($close,5)/$close")
NOISE = 0.01
WARM_UP = 60
"""Days never drawn at the start of a dataset, where most indicators have no value yet."""


def _texts(episode, label: str) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    from trade_tools.indicator_names import INDICATORS

    def shown(tool: str, arguments: dict) -> dict[str, str]:  # type: ignore[type-arg]
        return {"episode": label, "tool": tool, "args": json.dumps(arguments), "text": episode.call(tool, arguments)}

    for message in episode.messages():
        yield {"episode": label, "tool": message["role"], "args": "", "text": message["content"]}
    symbols = [episode.hide(s) for s in episode.shown_order([*episode.task.pool, *episode.task.holdings])]
    for symbol in symbols:
        for period in ("5d", "20d", "120d"):
            yield shown("get_price_data", {"symbol": symbol, "period": period, "indicators": list(INDICATORS)})
    for index in episode.view.indices():
        yield shown("get_macro_indicators", {"index": episode.hide(index), "period": "60d"})
    for factor in FACTORS:
        yield shown("compute_alpha_factor", {"expression": factor})
    yield shown("TakeAction", {"type": "buy", "symbol": symbols[0], "amount": 1000, "reasoning": "r"})
    yield shown("TakeAction", {"type": "sell", "symbol": symbols[-1], "amount": 100, "reasoning": "r"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--days", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from trade_core.errors import TradeError
    from trade_core.logging import configure_logging
    from trade_data.store import MarketStore
    from trade_tools.episode import Episode
    from trade_tools.sampler import day_task

    configure_logging(level="warning")  # stdout is the texts
    store = MarketStore.load(args.dataset)
    drawn = np.arange(WARM_UP, len(store.calendar))
    if not 1 <= args.days <= drawn.size:
        raise TradeError(
            f"--days {args.days}: {args.dataset} has {drawn.size} days after its first {WARM_UP}",
            hint=f"pass 1 to {drawn.size}" if drawn.size else "use a dataset of more days",
        )
    days = sorted(np.random.default_rng(args.seed).choice(drawn, args.days, replace=False))
    print(json.dumps({"dataset": args.dataset.name, "days": len(days)}))
    for t in days:
        date = store.calendar[int(t)].date()
        task = day_task(store, date, seed=int(t))
        variants = {
            "plain": task,
            "anonymized": task.model_copy(update={"anonymized": True}),
            "noisy": task.model_copy(update={"anonymized": True, "anonymize_noise": NOISE}),
        }
        for label, variant in variants.items():
            episode = Episode.start(variant, store)
            for line in _texts(episode, f"{date} {label}"):
                print(json.dumps(line, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    from trade_core.errors import TradeError

    try:
        sys.exit(main())
    except TradeError as error:  # not a dataset, too few days
        sys.exit(f"error: {error.one_line()}")
