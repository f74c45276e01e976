"""pytest fixtures over the sample market (a pytest plugin shipped with trade-data).

``TRADE_SAMPLE_DATA`` points at the real cn-csi300 folder (``daily.parquet``, ``calendar.txt``,
``csi300.txt``); without it the fixtures look for ``../shared/data/cn-csi300`` beside the
repository. Where neither exists (a fresh clone) the fixtures serve a synthetic stand-in written in the same three
files, so every test that does not assert the real prices still runs; a test that does is marked ``real_data`` and
skips there, and the run ends with its skips counted by reason. Later packages reuse these fixtures, opting in (it
imports numpy and pandas): ``pytest_plugins = ["trade_data.testing"]`` in a test module, or
``config.pluginmanager.import_plugin("trade_data.testing")`` in a conftest's ``pytest_configure``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def sample_data_dir() -> Path | None:
    """The real data folder, or None when this machine has none (or ``TRADE_SAMPLE_DATA`` names a folder without
    it: a variable that is set is not second-guessed)."""
    configured = os.environ.get("TRADE_SAMPLE_DATA")
    candidates = [parent / "shared" / "data" / "cn-csi300" for parent in Path(__file__).resolve().parents]
    candidates = (
        [Path(configured)] if configured else [*candidates, Path.cwd().parent / "shared" / "data" / "cn-csi300"]
    )
    for candidate in candidates:
        if (candidate / "daily.parquet").is_file():
            return candidate
    return None


REAL_DATA_ABSENT = "real sample absent (asserts its prices): set TRADE_SAMPLE_DATA to the cn-csi300 folder"
STAND_IN_SYMBOLS = 600
"""A csi300 of 300 members, as the real sample's 540 symbols give about 300 a day."""
STAND_IN_NAMES = (
    *("SH600000", "SH600027", "SH600036", "SH600050", "SH600372", "SH600519", "SH601012", "SH601018", "SH601318"),
    *("SH601398", "SH601728", "SZ000001", "SZ000002", "SZ000063", "SZ000538", "SZ002594", "SZ300014", "SZ300059"),
    *("SZ300750", "SH688187", "SH688981"),
)
"""The real codes tests name: the stand-in gives each to a csi300 stock of its board that trades on most days."""


def write_stand_in(folder: Path, seed: int = 0) -> Path:
    """The real sample's three files at ``folder``, written from the synthetic market (2018..2025, real-style
    codes for :data:`STAND_IN_NAMES`): what the fixtures read where the real sample is absent."""
    from trade_data.market_model import generate_market
    from trade_data.symbols import board_of

    market = generate_market(STAND_IN_SYMBOLS, "2018-01-01", "2025-12-31", seed)
    members = market.universes["csi300"]
    days_in = (members["end"] - members["start"]).dt.days.groupby(members["symbol"]).sum()
    traded = market.table.groupby("symbol").size()
    ranked = traded.add(days_in, fill_value=0).sort_values(ascending=False, kind="stable").index
    names = {code: code for code in traded.index}
    given: set[str] = set()
    for name in STAND_IN_NAMES:
        best = next(code for code in ranked if board_of(code) is board_of(name) and code not in given)
        holder = next((code for code, label in names.items() if label == name), best)
        names[holder], names[best] = names[best], name
        given.add(best)
    table = market.table.assign(symbol=market.table["symbol"].map(names)).sort_values(["symbol", "date"])
    folder.mkdir(parents=True, exist_ok=True)
    table.to_parquet(folder / "daily.parquet", index=False)
    (folder / "calendar.txt").write_text("".join(f"{day:%Y-%m-%d}\n" for day in market.calendar))
    members = members.assign(symbol=members["symbol"].map(names))
    rows = members.itertuples(index=False)
    (folder / "csi300.txt").write_text("".join(f"{r.symbol}\t{r.start:%Y-%m-%d}\t{r.end:%Y-%m-%d}\n" for r in rows))
    return folder


@pytest.fixture(scope="session")
def sample_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real cn-csi300 folder (CI always has it), or where it is absent its synthetic stand-in."""
    return sample_data_dir() or write_stand_in(tmp_path_factory.mktemp("stand-in"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_data: asserts the real sample's prices (skipped on its stand-in)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``real_data`` test skips where only the stand-in is there."""
    if item.get_closest_marker("real_data") and sample_data_dir() is None:
        pytest.skip(REAL_DATA_ABSENT)


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """How many tests skipped and why, one line a reason, and which market the sample fixtures served."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    found = sample_data_dir()
    market = f"the real sample at {found}" if found else "the synthetic stand-in (no real sample here)"
    terminalreporter.write_sep("-", f"sample market: {market}; {sum(reasons.values())} skipped")
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{count:5d}  {reason}")


@pytest.fixture(scope="session")
def sample_dataset(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample table (the real one, or the synthetic stand-in where it is absent) imported once per session as
    a Qlib dir (with the csi300 universe), its arrays and bar tables precomputed as `trade data import` leaves them."""
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
def sample_store(sample_dataset: Path):  # type: ignore[no-untyped-def]
    """A :class:`~trade_data.store.MarketStore` over :func:`sample_dataset`."""
    from trade_data.store import MarketStore

    return MarketStore.load(sample_dataset)


@pytest.fixture(scope="session")
def sample_table(sample_data: Path):  # type: ignore[no-untyped-def]
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
