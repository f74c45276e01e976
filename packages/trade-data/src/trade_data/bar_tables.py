"""Tables computed from each symbol's traded bars (e.g. trade-tools' indicator states), once per dataset version.

A :class:`BarTable` is a causal function of a symbol's traded bars: its row for a bar depends on that
bar and the earlier ones only. Computing it once over every bar of the dataset therefore gives, at a
symbol's traded day up to T0, exactly what computing it on the bars up to T0 gives: views read
those rows instead of recomputing them (point in time is kept by the function being causal, which
trade-tools' tests prove on re-imported futures). The rows are stored beside the store's arrays, symbol
after symbol in the order of ``traded_rows``, and memory-mapped. A table may keep every ``every``-th bar's
row only (a recursion's state, say): a reader gets the last kept row at or before T0's bar and carries it
on over the few bars since, which keeps the table a fraction of the bars' size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.lib.format import open_memmap
from tqdm import tqdm

from trade_core.registry import Registry
from trade_data import hookspecs
from trade_data.cache import cached_arrays
from trade_data.columns import VERSION as STORE_VERSION

if TYPE_CHECKING:
    from trade_data.store import Bars, MarketStore


@dataclass(frozen=True)
class BarTable:
    """A causal per-bar table: ``compute(bars)`` -> rows ``(len(bars), len(columns))``, adjusted bars."""

    name: str
    version: str
    """Change it whenever ``compute`` would give other values: stored tables of other versions are rebuilt."""
    columns: tuple[str, ...]
    compute: Callable[[Bars], np.ndarray]
    every: int = 1
    """Keep the rows of a symbol's bars 0, every, 2 x every, ... only."""
    dtype: type[np.floating] = np.float32
    """What the rows are stored as."""

    def __post_init__(self) -> None:
        """A plugin's table that could not be stored is refused where the plugin registers it."""
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"bar table {self.name!r}: every must be a whole number of bars >= 1, not {self.every!r}")
        if not (isinstance(self.dtype, type) and issubclass(self.dtype, np.floating)):
            raise ValueError(f"bar table {self.name!r}: dtype must be a numpy float type, not {self.dtype!r}")


class TableRow(NamedTuple):
    """A bar table's last kept row at or before a symbol's bar: its values, and how many bars that bar is after."""

    values: np.ndarray
    behind: int


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
        self._offsets: dict[int, np.ndarray] = {}

    def rows(self, table: BarTable) -> np.ndarray:
        """All of ``table``'s kept rows, symbol after symbol (see :meth:`offsets`)."""
        found = self._open.get(table.name)
        if found is None:
            store = self._store
            found = self._open[table.name] = cached_arrays(
                store.path,
                f"table-{table.name}",
                f"{table.version} {np.dtype(table.dtype).str} every {table.every} {STORE_VERSION}",
                lambda folder: _build(store, table, folder),
                fingerprint=store.fingerprint,
            )["rows"]
        return found

    def offsets(self, every: int) -> np.ndarray:
        """Where each symbol's rows start in a table keeping every ``every``-th bar (one past the last at the end)."""
        found = self._offsets.get(every)
        if found is None:
            kept = -(-np.diff(self._store.traded_offsets) // every)  # bars 0, every, ... of each symbol
            found = self._offsets[every] = np.concatenate([[0], np.cumsum(kept)])
        return found

    def row(self, table: BarTable, column: int, k: int) -> TableRow:
        """The last kept row at or before the ``k``-th traded bar of the symbol in ``column``."""
        start = self.offsets(table.every)[column]
        return TableRow(self.rows(table)[start + k // table.every], k % table.every)


def _build(store: MarketStore, table: BarTable, folder: Path) -> None:
    offsets = store.bar_tables.offsets(table.every)
    out = open_memmap(folder / "rows.npy", "w+", table.dtype, (int(offsets[-1]), len(table.columns)))
    last = store.asof(store.calendar[-1])  # its windows are every traded bar, read as the tools read them
    for j, symbol in enumerate(tqdm(store.symbols, desc=f"computing {table.name}", unit="symbol", disable=None)):
        if store._traded_rows[j].size:
            bars = last.window(symbol, len(store.calendar))
            out[offsets[j] : offsets[j + 1]] = table.compute(bars)[:: table.every]
    out.flush()
