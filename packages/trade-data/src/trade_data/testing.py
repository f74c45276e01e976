"""pytest fixtures over the real sample data (a pytest plugin shipped with trade-data).

``TRADE_SAMPLE_DATA`` points at the cn-csi300 folder (``daily.parquet``, ``calendar.txt``,
``csi300.txt``); without it the fixtures look for ``../shared/data/cn-csi300`` beside the
repository and skip with a reason when neither exists. Later packages reuse these fixtures, opting in (it imports
numpy and pandas): ``pytest_plugins = ["trade_data.testing"]`` in a test module, or
``config.pluginmanager.import_plugin("trade_data.testing")`` in a conftest's ``pytest_configure``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def sample_data_dir() -> Path | None:
    """The real data folder, or None when this machine has none."""
    configured = os.environ.get("TRADE_SAMPLE_DATA")
    candidates = [Path(configured)] if configured else []
    candidates += [parent / "shared" / "data" / "cn-csi300" for parent in Path(__file__).resolve().parents]
    candidates += [Path.cwd().parent / "shared" / "data" / "cn-csi300"]
    for candidate in candidates:
        if (candidate / "daily.parquet").is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def sample_data() -> Path:
    """The real cn-csi300 folder; skips when absent (CI always has it)."""
    found = sample_data_dir()
    if found is None:
        pytest.skip("real data absent: set TRADE_SAMPLE_DATA to the cn-csi300 folder")
    return found


@pytest.fixture(scope="session")
def real_dataset(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real table imported once per session as a Qlib dir (with the csi300 universe), its arrays and bar
    tables precomputed as `trade data import` leaves them."""
    from trade_data.bar_tables import precompute
    from trade_data.importer import import_table

    out = tmp_path_factory.mktemp("real") / "cn"
    import_table(
        sample_data / "daily.parquet",
        out,
        calendar_file=sample_data / "calendar.txt",
        universe_files={"csi300": sample_data / "csi300.txt"},
    )
    precompute(out)
    return out


@pytest.fixture(scope="session")
def real_store(real_dataset: Path):  # type: ignore[no-untyped-def]
    """A :class:`~trade_data.store.MarketStore` over :func:`real_dataset`."""
    from trade_data.store import MarketStore

    return MarketStore.load(real_dataset)


@pytest.fixture(scope="session")
def real_table(sample_data: Path):  # type: ignore[no-untyped-def]
    """The raw long table as read from ``daily.parquet`` (validated and sorted)."""
    from trade_data.table import read_table, validate_table

    return validate_table(read_table(sample_data / "daily.parquet"))


def perturb_future(
    table: pd.DataFrame, members: pd.DataFrame, t0: pd.Timestamp, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rewrite everything after ``t0``: prices, volumes and factors scaled at random, 10% of bars
    deleted, a new symbol SH605999 listed, and future universe membership changed.

    Point-in-time tests build a dataset from the result and check reads at ``t0`` do not change.
    """
    rng = np.random.default_rng(seed)
    table = table.copy()
    future = table["date"] > t0
    n = int(future.sum())
    scale = rng.uniform(0.5, 1.6, n)
    for price in ("open", "high", "low", "close"):
        table.loc[future, price] = np.round(table.loc[future, price] * scale, 2) + 0.01
    table.loc[future, "volume"] = np.round(table.loc[future, "volume"].fillna(0) * rng.uniform(0, 3, n))
    table.loc[future, "factor"] = table.loc[future, "factor"] * rng.uniform(1.0, 2.0, n)
    dropped = table.index[future][rng.random(n) < 0.1]
    table = table.drop(dropped)
    later = table[table["date"] > t0].drop_duplicates("date")[["date"]].head(30)
    newcomer = later.assign(symbol="SH605999", open=10.0, high=11.0, low=9.0, close=10.5, volume=1e6, factor=1.0)
    table = pd.concat([table, newcomer], ignore_index=True)
    members = members.copy()
    members = members[members["start"] <= t0]
    open_ended = members["end"] > t0
    members.loc[open_ended, "end"] = t0 + pd.Timedelta(days=int(rng.integers(1, 400)))
    joined = pd.DataFrame(
        {"symbol": ["SH605999"], "start": [t0 + pd.Timedelta(days=1)], "end": [pd.Timestamp("2025-12-31")]}
    )
    return table, pd.concat([members, joined], ignore_index=True)
