"""Helpers for trade-tools' tests: episodes on the real data and real days picked from it, and a small synthetic
market for tests that need any market (they run without the real data)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_data.synth import write_synthetic_market
from trade_tools.episode import Episode, Task


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures (a conftest below the rootdir cannot name them in ``pytest_plugins``)."""
    config.pluginmanager.import_plugin("trade_data.testing")


def _find_day(
    store: MarketStore,
    board: Board,
    flags: np.ndarray,
    *,
    after: str = "2018-03-01",
    change: tuple[float, float] | None = None,
) -> tuple[str, dt.date]:
    """The first (symbol, day) on ``board`` where ``flags`` is set (and the change is in range)."""
    start = int(store.calendar.searchsorted(after))
    columns = [j for j, s in enumerate(store.symbols) if board_of(s) is board]
    with np.errstate(invalid="ignore"):
        moves = store.adjusted["close"] / store.previous_close - 1
    for t in range(start, len(store.calendar)):
        for j in columns:
            if flags[t, j] and (change is None or change[0] < moves[t, j] < change[1]):
                return store.symbols[j], store.calendar[t].date()
    raise LookupError("no such day in the data")


@pytest.fixture
def find_day():  # type: ignore[no-untyped-def]
    """``find_day(store, board, flags, after=..., change=(lo, hi))``: a real (symbol, day) with ``flags`` set."""
    return _find_day


@pytest.fixture
def open_day(sample_store: MarketStore):  # type: ignore[no-untyped-def]
    """Start an Episode on the real data: ``open_day(date, pool, holdings=..., cash=...)``."""

    def start(
        date: object,
        pool: list[str],
        holdings: dict[str, int] | None = None,
        cash: float = 1_000_000.0,
        **kwargs: object,
    ) -> Episode:
        task = Task(task_id="t", date=date, pool=pool, holdings=holdings or {}, cash=cash)  # type: ignore[arg-type]
        return Episode.start(task, sample_store, **kwargs)  # type: ignore[arg-type]

    return start


@pytest.fixture(scope="session")
def synth_store(tmp_path_factory: pytest.TempPathFactory) -> MarketStore:
    """A synthetic market of 40 stocks over 2020's first half (no signal), written and loaded as `trade data synth`
    leaves one."""
    out = write_synthetic_market(tmp_path_factory.mktemp("synth") / "m", 40, "2020-01-01", "2020-06-30", seed=1)
    return MarketStore.load(out)
