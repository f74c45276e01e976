"""Tables computed from each symbol's traded bars (e.g. trade-tools' indicators), once per dataset version.

A :class:`BarTable` is a causal function of a symbol's traded bars: its row for a bar depends on that
bar and the earlier ones only. Computing it once over every bar of the dataset therefore gives, at a
symbol's last traded day up to T0, exactly what computing it on the bars up to T0 gives: views read
those rows instead of recomputing them (point in time is kept by the function being causal, which
trade-tools' tests prove on re-imported futures). The rows are stored beside the store's arrays, one
per traded bar in the order of ``traded_rows``, and memory-mapped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.lib.format import open_memmap
from tqdm import tqdm

from trade_core.registry import Registry
from trade_data import hookspecs
from trade_data.cache import cached_arrays
from trade_data.columns import PRICE_FIELDS
from trade_data.columns import VERSION as STORE_VERSION

if TYPE_CHECKING:
    from trade_data.store import Bars, MarketStore


@dataclass(frozen=True)
class BarTable:
    """A causal per-bar table: ``compute(bars)`` -> float32 rows ``(len(bars), len(columns))``, adjusted bars."""

    name: str
    version: str
    """Change it whenever ``compute`` would give other values: stored tables of other versions are rebuilt."""
    columns: tuple[str, ...]
    compute: Callable[[Bars], np.ndarray]


BAR_TABLES = Registry(hookspecs.trade_register_bar_tables, "bar table", BarTable)


def precompute(dataset: Path) -> None:
    """Build the store's arrays and every registered bar table of ``dataset`` now, not in the first process that
    reads it: the commands that write a dataset end with this."""
    from trade_data.store import MarketStore

    store = MarketStore.load(dataset)
    for table in BAR_TABLES.all().values():
        store.bar_tables.rows(table)


class BarTables:
    """A store's bar tables, each opened (or built) on first use."""

    def __init__(self, store: MarketStore) -> None:
        self._store = store
        self._open: dict[str, np.ndarray] = {}

    def rows(self, table: BarTable) -> np.ndarray:
        """All of ``table``'s rows, one per traded bar, symbol after symbol (see ``traded_offsets``)."""
        found = self._open.get(table.name)
        if found is None:
            store = self._store
            found = self._open[table.name] = cached_arrays(
                store.path,
                f"table-{table.name}",
                f"{table.version} {STORE_VERSION}",
                lambda folder: _build(store, table, folder),
                fingerprint=store.fingerprint,
            )["rows"]
        return found

    def row(self, table: BarTable, column: int, k: int) -> np.ndarray:
        """The row of the ``k``-th traded bar of the symbol in ``column``."""
        return self.rows(table)[self._store.traded_offsets[column] + k]


def _build(store: MarketStore, table: BarTable, folder: Path) -> None:
    from trade_data.store import Bars

    offsets = store.traded_offsets
    out = open_memmap(folder / "rows.npy", "w+", np.float32, (int(offsets[-1]), len(table.columns)))
    for j, symbol in enumerate(tqdm(store.symbols, desc=f"computing {table.name}", unit="symbol", disable=None)):
        picked = store._traded_rows[j]
        if picked.size:
            prices = {name: store.adjusted[name][picked, j] for name in PRICE_FIELDS}
            volume = store.volume[picked, j]
            bars = Bars(symbol=symbol, dates=store.dates[picked], volume=volume, adjusted=True, **prices)
            out[offsets[j] : offsets[j + 1]] = table.compute(bars)
    out.flush()
