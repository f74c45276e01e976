"""Point in time: a baseline's day is the same when every bar after that day is changed (real data, through
the real import and load path)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_data.qlib_dir import DatasetMeta, read_calendar_file, read_instruments_file, write_dataset
from trade_data.store import MarketStore
from trade_data.testing import perturb_future
from trade_eval.backtest import Backtest
from trade_eval.policies.baselines import BASELINES
from trade_eval.policy import RunSettings


def _days(backtest: Backtest, policy) -> list[tuple[dict, list]]:  # type: ignore[no-untyped-def]
    """The days of ``policy`` (the oracle reads KMID, as `--set signal=KMID` has it; the others ignore the option)."""

    async def collect() -> list[tuple[dict, list]]:
        return [
            (record.model_dump(exclude={"trajectory_id"}), trajectory.episode.actions)
            async for record, trajectory in backtest.days(policy, RunSettings(seed=4, options={"signal": "KMID"}))
        ]

    return asyncio.run(collect())


@pytest.mark.slow
def test_baseline_days_ignore_the_future(
    sample_store: MarketStore, sample_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(21)
    t = int(rng.integers(300, len(sample_store.calendar) - 5))
    t0 = sample_store.calendar[t]
    table, members = perturb_future(sample_table, read_instruments_file(sample_data / "csi300.txt"), t0, 21)
    out = write_dataset(
        table,
        tmp_path / "perturbed",
        meta=DatasetMeta(source="perturbed"),
        calendar=read_calendar_file(sample_data / "calendar.txt"),
        universes={"csi300": members},
    )
    perturbed = MarketStore.load(out)
    start = sample_store.calendar[t - 7].date()
    for cls in BASELINES:
        original, changed = (
            _days(Backtest(store, start, 8, pool_size=15), cls()) for store in (sample_store, perturbed)
        )
        assert changed == original, cls.name
        assert any(actions[:-1] for _, actions in original)
    later = Backtest(perturbed, start, 9, pool_size=15).simulate(BASELINES[1](), RunSettings())[-1]
    assert later.nav != Backtest(sample_store, start, 9, pool_size=15).simulate(BASELINES[1](), RunSettings())[-1].nav
