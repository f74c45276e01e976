"""Qlib's file-based provider layout, written and read directly.

``calendars/day.txt``, ``instruments/<universe>.txt`` (``SYMBOL<TAB>start<TAB>end``) and
``features/<lower-case symbol>/<field>.day.bin``: little-endian float32 whose first value is
the start index into the calendar, then one value per calendar day (NaN on suspensions).
Prices are stored adjusted (raw x factor) and volume as raw shares / factor, Qlib's cn
convention; ``raw = adjusted / factor`` recovers the original prices. ``trade.json`` records
where the data came from, above all whether it is synthetic.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field
from tqdm import tqdm

from trade_data.errors import DatasetError, DataValidationError
from trade_data.table import validate_table

FIELDS = ("open", "high", "low", "close", "volume", "factor", "change")
META_FILE = "trade.json"
_FORMAT_VERSION = 1


class DatasetMeta(BaseModel):
    """Provenance of a dataset folder, stored as ``trade.json`` beside Qlib's files."""

    format_version: int = _FORMAT_VERSION
    synthetic: bool = False
    source: str = Field(description="where the bars came from, e.g. 'import:daily.parquet' or 'synth'")
    parameters: dict[str, object] = Field(default_factory=dict, description="generator or download settings")
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def read_calendar_file(path: Path) -> pd.DatetimeIndex:
    """Dates one per line (``YYYY-MM-DD``); blank lines ignored; must be strictly increasing."""
    if not path.is_file():
        raise DataValidationError(f"{path}: no such calendar file")
    lines = [(number, line.strip()) for number, line in enumerate(path.read_text().splitlines(), start=1)]
    days = []
    for number, line in lines:
        if not line:
            continue
        try:
            days.append(dt.date.fromisoformat(line))
        except ValueError:
            raise DataValidationError(f"{path}:{number}: {line[:40]!r} is not one YYYY-MM-DD date per line") from None
    dates = pd.DatetimeIndex(days).as_unit("ns")
    if len(dates) == 0:
        raise DataValidationError(f"{path}: the calendar is empty")
    if not dates.is_monotonic_increasing or dates.has_duplicates:
        raise DataValidationError(f"{path}: calendar dates must be strictly increasing")
    return dates


def read_instruments_file(path: Path) -> pd.DataFrame:
    """Membership intervals ``SYMBOL start end`` (tab or space separated) as a frame."""
    if not path.is_file():
        raise DataValidationError(f"{path}: no such universe file")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 3:
                raise ValueError("want 3 fields")
            start, end = dt.date.fromisoformat(parts[1]), dt.date.fromisoformat(parts[2])
            if end < start:
                raise ValueError("end before start")
        except ValueError as exc:
            raise DataValidationError(
                f"{path}:{number}: {line.strip()!r} is not 'SYMBOL<TAB>YYYY-MM-DD<TAB>YYYY-MM-DD' ({exc})"
            ) from exc
        rows.append((parts[0].upper(), pd.Timestamp(start), pd.Timestamp(end)))
    return pd.DataFrame(rows, columns=["symbol", "start", "end"])


def _write_instruments(path: Path, members: pd.DataFrame) -> None:
    lines = (f"{r.symbol}\t{r.start:%Y-%m-%d}\t{r.end:%Y-%m-%d}\n" for r in members.itertuples())
    path.write_text("".join(lines))


def _encode(symbol_rows: pd.DataFrame, calendar: pd.DatetimeIndex) -> tuple[int, dict[str, np.ndarray]]:
    """One symbol's rows -> (start index, field -> dense float32 array over its calendar span)."""
    positions = calendar.get_indexer(symbol_rows["date"])
    start, end = int(positions[0]), int(positions[-1])
    offsets = positions - start
    adjusted = {
        "open": symbol_rows["open"].to_numpy() * symbol_rows["factor"].to_numpy(),
        "high": symbol_rows["high"].to_numpy() * symbol_rows["factor"].to_numpy(),
        "low": symbol_rows["low"].to_numpy() * symbol_rows["factor"].to_numpy(),
        "close": symbol_rows["close"].to_numpy() * symbol_rows["factor"].to_numpy(),
        "volume": symbol_rows["volume"].to_numpy() / symbol_rows["factor"].to_numpy(),
        "factor": symbol_rows["factor"].to_numpy(),
    }
    close = adjusted["close"]
    change = np.full(len(close), np.nan)
    change[1:] = close[1:] / close[:-1] - 1.0  # versus the last traded close, across suspensions
    adjusted["change"] = change
    dense = {}
    for name, values in adjusted.items():
        column = np.full(end - start + 1, np.nan, dtype="<f4")
        column[offsets] = values
        dense[name] = column
    return start, dense


def _write_features(root: Path, table: pd.DataFrame, calendar: pd.DatetimeIndex, progress: bool) -> None:
    groups = table.groupby("symbol", sort=True)
    for symbol, rows in tqdm(
        groups, total=groups.ngroups, desc="writing features", unit="symbol", disable=not progress
    ):
        folder = root / "features" / str(symbol).lower()
        folder.mkdir(parents=True)
        start, dense = _encode(rows, calendar)
        for name, column in dense.items():
            with open(folder / f"{name}.day.bin", "wb") as handle:
                np.array([start], dtype="<f4").tofile(handle)
                column.tofile(handle)


def write_dataset(
    table: pd.DataFrame,
    out: Path,
    *,
    meta: DatasetMeta,
    calendar: Sequence[pd.Timestamp] | None = None,
    universes: Mapping[str, pd.DataFrame] | None = None,
    source: str = "table",
    progress: bool = False,
) -> Path:
    """Validate ``table`` and write it as a Qlib provider dir at ``out``, atomically.

    Everything is written into a temporary sibling folder that replaces ``out`` only when
    complete, so a failure leaves any previous dataset at ``out`` untouched. ``calendar``
    defaults to the table's dates; ``universes`` maps a name to membership intervals.
    """
    out = Path(out)
    refuse_foreign_folder(out)
    cal = pd.DatetimeIndex(calendar if calendar is not None else sorted(table["date"].unique())).as_unit("ns")
    frame = validate_table(table, calendar=cal, source=source)
    if frame.empty:
        raise DataValidationError(f"{source}: the table has no rows")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        (staging / "calendars").mkdir(parents=True)
        (staging / "instruments").mkdir()
        (staging / "calendars" / "day.txt").write_text("".join(f"{d:%Y-%m-%d}\n" for d in cal))
        spans = frame.groupby("symbol")["date"].agg(["min", "max"]).reset_index()
        spans.columns = ["symbol", "start", "end"]
        _write_instruments(staging / "instruments" / "all.txt", spans)
        for name, members in (universes or {}).items():
            _write_instruments(staging / "instruments" / f"{name}.txt", members.sort_values(["symbol", "start"]))
        _write_features(staging, frame, cal, progress)
        (staging / META_FILE).write_text(meta.model_dump_json(indent=2) + "\n")
        swap_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def refuse_foreign_folder(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_dataset(out))):
        raise DatasetError(
            f"{out} exists and is not a trade-agent dataset", hint="choose a new or empty folder for --out"
        )


def swap_into_place(staging: Path, out: Path) -> None:
    if not out.exists():
        os.replace(staging, out)
        return
    retired = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    os.replace(out, retired)
    os.replace(staging, out)
    shutil.rmtree(retired, ignore_errors=True)


def is_dataset(folder: Path) -> bool:
    return (folder / "calendars" / "day.txt").is_file() and (folder / "instruments" / "all.txt").is_file()


def require_dataset(folder: Path) -> Path:
    folder = Path(folder)
    if not is_dataset(folder):
        raise DatasetError(
            f"{folder} is not a dataset (no calendars/day.txt and instruments/all.txt)",
            hint="create one with `trade data import` or `trade data synth`",
        )
    return folder


def read_meta(folder: Path) -> DatasetMeta:
    """The dataset's ``trade.json``; a Qlib dir made elsewhere counts as real data of unknown source."""
    path = Path(folder) / META_FILE
    if not path.is_file():
        return DatasetMeta(source="qlib dir (no trade.json)", created_at="")
    return DatasetMeta.model_validate_json(path.read_text())


def read_calendar(folder: Path) -> pd.DatetimeIndex:
    return read_calendar_file(require_dataset(folder) / "calendars" / "day.txt")


def list_universes(folder: Path) -> list[str]:
    return sorted(p.stem for p in (Path(folder) / "instruments").glob("*.txt") if p.stem != "all")


def read_universe(folder: Path, name: str) -> pd.DataFrame:
    path = Path(folder) / "instruments" / f"{name}.txt"
    if not path.is_file():
        known = ", ".join(["all", *list_universes(folder)])
        raise DatasetError(f"unknown universe '{name}' in {folder}", hint=f"known: {known}")
    return read_instruments_file(path)


def read_feature(folder: Path, symbol: str, field: str) -> tuple[int, np.ndarray]:
    """(start index, values) of one field; (0, empty) when the file is absent."""
    path = Path(folder) / "features" / symbol.lower() / f"{field}.day.bin"
    if not path.is_file():
        return 0, np.empty(0, dtype="<f4")
    data = np.fromfile(path, dtype="<f4")
    if data.size == 0:
        return 0, data
    return int(data[0]), data[1:]


def read_table_back(folder: Path, symbols: Iterable[str] | None = None) -> pd.DataFrame:
    """Decode a dataset into the long raw table it was written from (raw = adjusted / factor).

    Used to append newer bars to an existing dataset; values round-trip through float32.
    """
    folder = require_dataset(folder)
    calendar = read_calendar(folder)
    if symbols is None:
        symbols = read_instruments_file(folder / "instruments" / "all.txt")["symbol"]
    parts = []
    for symbol in symbols:
        start, factor = read_feature(folder, symbol, "factor")
        if factor.size == 0:
            continue
        keep = ~np.isnan(factor)
        columns: dict[str, object] = {"date": calendar[start : start + factor.size][keep], "symbol": symbol}
        f = factor[keep].astype("float64")
        for name in ("open", "high", "low", "close"):
            columns[name] = read_feature(folder, symbol, name)[1][keep].astype("float64") / f
        columns["volume"] = read_feature(folder, symbol, "volume")[1][keep].astype("float64") * f
        columns["factor"] = f
        parts.append(pd.DataFrame(columns))
    return pd.concat(parts, ignore_index=True)
