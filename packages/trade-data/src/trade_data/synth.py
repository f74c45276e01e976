"""A synthetic market written as a dataset marked synthetic: simulated whole, or streamed in blocks of stocks.

The model (:mod:`trade_data.market_model`) simulates a days x symbols grid in memory, which bounds the
market it can make at once; the whole A-share market over 20 years is streamed here instead, a block of
stocks at a time, so memory stays bounded whatever its size.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import structlog
from tqdm import tqdm

from trade_data.errors import DatasetError
from trade_data.market_model import (
    INDEX_BASES,
    MAX_CELLS,
    Stocks,
    checked_calendar,
    common_shocks,
    generate_market,
    index_bars,
    index_sizes,
    index_sums,
    index_table,
    long_table,
    market_parameters,
    member_intervals,
    period_caps,
    rank_members,
    rebalance_days,
    simulate_stocks,
    stock_codes,
)
from trade_data.qlib_dir import DatasetMeta, is_dataset, read_meta, refuse_foreign_folder, write_dataset_blocks
from trade_data.signals import PlantedSignal

log = structlog.get_logger("trade.data.synth")

MAX_STREAMED_CELLS = 40_000_000
"""Most trading days x symbols ``write_synthetic_market`` writes, in blocks of :data:`STREAM_BLOCK` stocks."""
STREAM_BLOCK = 250


def write_synthetic_market(
    out: Path,
    symbols: int = 300,
    start: str | dt.date = "2018-01-01",
    end: str | dt.date = "2025-12-31",
    seed: int = 0,
    *,
    signal: PlantedSignal | None = None,
    progress: bool = False,
    stream: bool | None = None,
) -> Path:
    """Generate a market and write it at ``out``, marked synthetic in ``trade.json``.

    ``out`` is checked before generating, so a wrong folder fails at once; a synthetic dataset
    there is replaced, real data never is. ``stream`` simulates and writes blocks of stocks one at
    a time (bounded memory, another market for the same seed); by default markets over
    :data:`MAX_CELLS` symbol-days are streamed, up to :data:`MAX_STREAMED_CELLS`.
    """
    out = Path(out)
    _check_out(out)
    calendar = checked_calendar(symbols, start, end, seed, MAX_STREAMED_CELLS)
    streamed = len(calendar) * symbols > MAX_CELLS if stream is None else stream
    if streamed:
        universes: dict[str, pd.DataFrame] = {}
        blocks = _stream_market(stock_codes(symbols), calendar, seed, universes, progress, signal)
        parameters = market_parameters(symbols, start, end, seed, signal, stream_block=STREAM_BLOCK)
    else:
        market = generate_market(symbols, start, end, seed, signal)
        blocks, universes, parameters = [market.table], market.universes, market.parameters
    meta = DatasetMeta(synthetic=True, source="synth", parameters=parameters)
    write_dataset_blocks(
        blocks, out, meta=meta, calendar=calendar, universes=universes, source="synth", progress=progress
    )
    log.info("synth.done", dataset=str(out), symbols=symbols, seed=seed, streamed=streamed)
    return out


def _stream_market(
    codes: np.ndarray,
    calendar: pd.DatetimeIndex,
    seed: int,
    universes: dict[str, pd.DataFrame],
    progress: bool,
    signal: PlantedSignal | None,
) -> Iterator[pd.DataFrame]:
    """A market too large for memory as long tables of :data:`STREAM_BLOCK` stocks, then its indices.

    Every block has its own seeded generator and all share the market and sector shocks. The
    indices weigh members ranked over the whole market, so once every block is ranked (which fills
    ``universes``) each block is simulated again, identically, and its sums added to the indices'. A planted
    signal is ranked within each block (250 random stocks stand in for the market's cross-section).
    """
    starts = range(0, len(codes), STREAM_BLOCK)
    common_seed, *block_seeds = np.random.SeedSequence(seed).spawn(1 + len(starts))
    common = common_shocks(np.random.default_rng(common_seed), len(calendar))

    def simulate(k: int) -> Stocks:
        block = codes[starts[k] : starts[k] + STREAM_BLOCK]
        return simulate_stocks(np.random.default_rng(block_seeds[k]), block, calendar, common, signal)

    periods = rebalance_days(calendar)
    keys = []
    for k in tqdm(range(len(starts)), desc="simulating stocks", unit="block", disable=not progress):
        stocks = simulate(k)
        keys.append(period_caps(stocks, periods))
        yield long_table(stocks, {}, calendar)
    member300, member500 = rank_members(np.hstack(keys), *index_sizes(len(codes)))
    universes["csi300"] = member_intervals(member300, periods, calendar, codes)
    universes["csi500"] = member_intervals(member500, periods, calendar, codes)
    period_of_day = np.searchsorted(periods, np.arange(len(calendar)), side="right") - 1
    member300, member500 = member300[period_of_day], member500[period_of_day]
    sums = dict.fromkeys(INDEX_BASES, 0.0)
    for k in tqdm(range(len(starts)), desc="summing indices", unit="block", disable=not progress):
        stocks = simulate(k)
        columns = slice(starts[k], starts[k] + len(stocks.codes))
        members = {"SH000001": stocks.listed, "SH000300": member300[:, columns], "SH000905": member500[:, columns]}
        for code, member in members.items():
            sums[code] = sums[code] + index_sums(stocks, member)
    yield index_table({code: index_bars(total, INDEX_BASES[code]) for code, total in sums.items()}, calendar)


def _check_out(out: Path) -> None:
    refuse_foreign_folder(out)
    if is_dataset(out) and not read_meta(out).synthetic:
        raise DatasetError(f"{out} holds real market data", hint="write the synthetic market to another folder")
