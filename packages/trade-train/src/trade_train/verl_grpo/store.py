"""One MarketStore per dataset per process, so each Ray worker loads the market data once.

verl builds the tool objects once per agent-loop worker and an agent loop per trajectory; all of them
reach the data through :func:`market_store`, so thousands of rollouts share one set of arrays.
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
