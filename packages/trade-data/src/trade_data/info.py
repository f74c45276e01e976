"""What a dataset holds: symbols, dates, universes, suspensions, and whether it is synthetic."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from pydantic import BaseModel

from trade_data.cache import CACHE_FOLDER, cached_tables
from trade_data.qlib_dir import (
    list_universes,
    read_calendar,
    read_feature,
    read_instruments_file,
    read_meta,
    read_universe,
    require_dataset,
    settle,
)
from trade_data.signals import describe_dataset
from trade_data.symbols import Board, board_of


class UniverseInfo(BaseModel):
    name: str
    symbols: int
    with_data: int
    members_first_day: int
    members_last_day: int


class DatasetInfo(BaseModel):
    path: str
    synthetic: bool
    source: str
    description: str
    """What reports say of it: 'real market data', 'synthetic', 'synthetic, planted signal KMID, IC 0.2'."""
    symbols: int
    stocks: int
    indices: list[str]
    first_date: str
    last_date: str
    trading_days: int
    universes: list[UniverseInfo]
    suspended_days: int
    """Stock-days inside a stock's listed span without a bar or with no volume (not traded)."""
    warnings: list[str]
    """What a reader of this dataset should know, e.g. a universe that ends before the data."""
    bytes_on_disk: int
    """The dataset's own files (bars, calendar, instruments, trade.json)."""
    precomputed: dict[str, int]
    """Bytes of each table precomputed from the bars (``store``, ``table-indicators``, ...), stored in the dataset."""

    def to_text(self) -> str:
        kind = "SYNTHETIC market (not real data)" if self.synthetic else "real market data"
        if self.synthetic and self.description != "synthetic":
            kind += f"; {self.description.removeprefix('synthetic, ')}"
        lines = [
            f"dataset     {self.path}  [{kind}; source: {self.source}]",
            f"symbols     {self.symbols} ({self.stocks} stocks, indices: {', '.join(self.indices) or 'none'})",
            f"dates       {self.first_date} .. {self.last_date} ({self.trading_days} trading days)",
            f"suspended   {self.suspended_days} stock-days without a bar or volume inside their listed span",
        ]
        for u in self.universes:
            lines.append(
                f"universe    {u.name}: {u.symbols} symbols ({u.with_data} with bars), "
                f"{u.members_first_day} members on the first day, {u.members_last_day} on the last"
            )
        lines.append(f"on disk     {_megabytes(self.bytes_on_disk)} of bars")
        built = ", ".join(f"{name} {_megabytes(size)}" for name, size in self.precomputed.items())
        lines.append(f"precomputed {built or 'none yet (built on the first MarketStore.load)'}")
        lines += [f"warning     {warning}" for warning in self.warnings]
        return "\n".join(lines)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def _dataset_bytes(folder: Path) -> int:
    """Bytes of the dataset's files, the precomputed tables left out."""
    cache = folder / CACHE_FOLDER
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and cache not in p.parents)


def _members_on(members, day) -> int:  # type: ignore[no-untyped-def]
    return int(((members["start"] <= day) & (members["end"] >= day)).sum())


def ending_early(universes: Mapping[str, pd.DataFrame], last_day: pd.Timestamp) -> dict[str, pd.Timestamp]:
    """The last day of each universe whose intervals end before ``last_day``: later days have no members."""
    ends = {name: members["end"].max() for name, members in universes.items() if not members.empty}
    return {name: end for name, end in ends.items() if end < last_day}


def dataset_info(folder: Path) -> DatasetInfo:
    folder = require_dataset(settle(Path(folder)))
    meta = read_meta(folder)
    calendar = read_calendar(folder)
    last = calendar[-1]
    listed = read_instruments_file(folder / "instruments" / "all.txt")
    symbols = list(listed["symbol"])
    indices = [s for s in symbols if board_of(s) is Board.INDEX]
    suspended = 0
    for symbol in symbols:
        if symbol not in indices:
            volume = read_feature(folder, symbol, "volume")[1]
            suspended += int((~(volume > 0)).sum())
    known = set(symbols)
    universes = []
    members_of = {name: read_universe(folder, name) for name in list_universes(folder)}
    for name, members in members_of.items():
        universes.append(
            UniverseInfo(
                name=name,
                symbols=members["symbol"].nunique(),
                with_data=len(set(members["symbol"]) & known),
                members_first_day=_members_on(members, calendar[0]),
                members_last_day=_members_on(members, calendar[-1]),
            )
        )
    return DatasetInfo(
        path=str(folder),
        synthetic=meta.synthetic,
        source=meta.source,
        description=describe_dataset(meta.synthetic, meta.parameters),
        symbols=len(symbols),
        stocks=len(symbols) - len(indices),
        indices=indices,
        first_date=f"{calendar[0]:%Y-%m-%d}",
        last_date=f"{calendar[-1]:%Y-%m-%d}",
        trading_days=len(calendar),
        universes=universes,
        suspended_days=suspended,
        bytes_on_disk=_dataset_bytes(folder),
        precomputed={name.rsplit("-", 1)[0]: size for name, size in cached_tables(folder)},
        warnings=[
            f"universe {name} ends {end:%Y-%m-%d}, before the data ({last:%Y-%m-%d}): later days have no members"
            for name, end in ending_early(members_of, last).items()
        ],
    )
