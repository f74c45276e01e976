"""One MarketStore per dataset per process, so each Ray worker opens the market data once.

verl builds the tool objects once per agent-loop worker and an agent loop per trajectory, TRL an environment
per rollout; all of them reach the data through :func:`market_store`, so thousands of rollouts share one set
of arrays. The
arrays (and the indicator tables) are memory-mapped from the dataset's precomputed files, so the
workers of a node share one copy in the page cache: a worker adds tens of MB, not the market's size.
"""

from __future__ import annotations

import functools
from pathlib import Path

from trade_data.store import MarketStore


def market_store(data: Path | str) -> MarketStore:
    """The process-wide MarketStore of the dataset at ``data`` (loaded on first use)."""
    return _load(str(Path(data).expanduser().resolve()))


@functools.cache
def _load(path: str) -> MarketStore:
    return MarketStore.load(path)
