"""Point in time: whatever happens after T0, every read and the market summary at T0 stay the same.

For random T0s on the real data, a second dataset is built in which every bar after T0 is
changed (prices, volumes, adjustment factors), some future bars are deleted, a symbol lists
after T0 and the universe's future membership is rewritten. It goes through the real import
and load path; every read at T0 must be identical to the original dataset's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_data.qlib_dir import DatasetMeta, read_calendar_file, read_instruments_file, write_dataset
from trade_data.store import MarketStore, PointInTimeView
from trade_data.summary import market_summary
from trade_data.testing import perturb_future

INDICES = ["SH000001", "SH000300", "SH000905"]


def snapshot(view: PointInTimeView, rng: np.random.Generator) -> dict[str, object]:
    """Everything a tool or prompt can read at T0, as plain data."""
    symbols = view.symbols()
    picked = sorted({*rng.choice(symbols, size=min(25, len(symbols)), replace=False), *INDICES} & set(symbols))
    shot: dict[str, object] = {
        "symbols": symbols,
        "members": {u: view.members(u) for u in view.universes},
        "advancers": view.advancers("csi300"),
        "summary": market_summary(view).model_dump(),
        "summary_text": market_summary(view).to_text(),
    }
    for adjusted in (True, False):
        shot[f"section-{adjusted}"] = view.cross_section(symbols, adjusted=adjusted)
    for symbol in picked:
        for adjusted in (True, False):
            bars = view.window(symbol, 60, adjusted=adjusted)
            shot[f"{symbol}-{adjusted}"] = {k: v for k, v in vars(bars).items()}
        shot[f"{symbol}-flags"] = (view.is_suspended(symbol), view.at_limit_up(symbol), view.at_limit_down(symbol))
        shot[f"{symbol}-series"] = (view.series(symbol, "close"), view.series(symbol, "volume"))
        if len(view.window(symbol, 1)):
            shot[f"{symbol}-last"] = (view.last_close(symbol), view.last_close(symbol, adjusted=True))
    return shot


@pytest.fixture(scope="module")
def random_days(sample_store: MarketStore) -> list[pd.Timestamp]:
    rng = np.random.default_rng(2024)
    inner = sample_store.calendar[25:-10]
    return [sample_store.calendar[3], *sorted(rng.choice(inner, size=4, replace=False))]


@pytest.mark.slow
@pytest.mark.parametrize("k", range(5))
def test_future_changes_leave_every_read_at_t0_unchanged(
    k: int, random_days, sample_store: MarketStore, sample_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    t0 = pd.Timestamp(random_days[k])
    members = read_instruments_file(sample_data / "csi300.txt")
    table, new_members = perturb_future(sample_table, members, t0, seed=k)
    out = write_dataset(
        table,
        tmp_path / "perturbed",
        meta=DatasetMeta(source="perturbed"),
        calendar=read_calendar_file(sample_data / "calendar.txt"),
        universes={"csi300": new_members},
    )
    perturbed = MarketStore.load(out)
    assert not np.array_equal(
        perturbed.adjusted["close"], sample_store.adjusted["close"], equal_nan=True
    )  # the future did change
    original = snapshot(sample_store.asof(t0), np.random.default_rng(k))
    changed = snapshot(perturbed.asof(t0), np.random.default_rng(k))
    np.testing.assert_equal(changed, original)
    later = perturbed.shift(t0, 1)  # the check can fail: one day later the perturbation shows
    seen = perturbed.asof(later).cross_section(["SH000300"])["close"]
    assert not np.array_equal(seen, sample_store.asof(later).cross_section(["SH000300"])["close"])


@pytest.mark.slow
def test_deleting_the_future_leaves_every_read_unchanged(
    sample_store: MarketStore, sample_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:
    t0 = pd.Timestamp("2023-08-28")  # stamp duty change day, mid-sample
    calendar = read_calendar_file(sample_data / "calendar.txt")
    members = read_instruments_file(sample_data / "csi300.txt")
    members = members[members["start"] <= t0].assign(end=lambda m: m["end"].clip(upper=t0))
    out = write_dataset(
        sample_table[sample_table["date"] <= t0],
        tmp_path / "cut",
        meta=DatasetMeta(source="cut"),
        calendar=calendar[calendar <= t0],
        universes={"csi300": members},
    )
    cut = MarketStore.load(out)
    np.testing.assert_equal(
        snapshot(cut.asof(t0), np.random.default_rng(1)), snapshot(sample_store.asof(t0), np.random.default_rng(1))
    )
