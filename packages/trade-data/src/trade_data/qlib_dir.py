"""Qlib's file-based provider layout, written and read directly.

``calendars/day.txt``, ``instruments/<universe>.txt`` (``SYMBOL<TAB>start<TAB>end``) and
``features/<lower-case symbol>/<field>.day.bin``: little-endian float32 whose first value is
the start index into the calendar, then one value per calendar day (NaN on suspensions).
Prices are stored adjusted (raw x factor) and volume as raw shares / factor, Qlib's cn
convention; ``raw = adjusted / factor`` recovers the original prices. ``trade.json`` records
where the data came from, above all whether it is synthetic.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field
from tqdm import tqdm

from trade_core.files import lock_file
from trade_data.errors import DatasetError, DataValidationError
from trade_data.table import stored_values, validate_table

FIELDS = ("open", "high", "low", "close", "volume", "factor", "change")
META_FILE = "trade.json"
_FORMAT_VERSION = 1
_UNIVERSE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


class DatasetMeta(BaseModel):
    """Provenance of a dataset folder, stored as ``trade.json`` beside Qlib's files."""

    format_version: int = _FORMAT_VERSION
    synthetic: bool = False
    source: str = Field(description="where the bars came from, e.g. 'import:daily.parquet' or 'synth'")
    parameters: dict[str, object] = Field(default_factory=dict, description="generator or download settings")
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    stamp: str = Field(
        "",
        description="a fresh id written with every write by trade's writers: what is derived from the bars is keyed "
        "by it, so opening needs no scan of the feature files; empty where written before stamps or by other tools",
    )


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
    """One symbol's rows -> (start index, field -> dense float32 array over its calendar span).

    ``change`` is computed from the stored float32 closes, so rewriting rows read back from a
    dataset (an append) gives the same bytes again.
    """
    positions = calendar.get_indexer(symbol_rows["date"])
    start, end = int(positions[0]), int(positions[-1])
    offsets = positions - start
    stored = stored_values(symbol_rows)
    close = stored["close"].astype("float64")
    change = np.full(len(close), np.nan)
    change[1:] = close[1:] / close[:-1] - 1.0  # versus the last traded close, across suspensions
    stored["change"] = change.astype("<f4")
    dense = {}
    for name, values in stored.items():
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

    ``calendar`` defaults to the table's dates; ``universes`` maps a name to membership intervals.
    """
    cal = calendar if calendar is not None else sorted(table["date"].unique())
    return write_dataset_blocks(
        [table], out, meta=meta, calendar=cal, universes=universes or {}, source=source, progress=progress
    )


def write_dataset_blocks(
    tables: Iterable[pd.DataFrame],
    out: Path,
    *,
    meta: DatasetMeta,
    calendar: Sequence[pd.Timestamp],
    universes: Mapping[str, pd.DataFrame],
    source: str = "table",
    progress: bool = False,
) -> Path:
    """Write ``tables`` (blocks of whole symbols, each validated) as one Qlib provider dir at ``out``, atomically.

    One block is in memory at a time, so a generator can stream a market larger than memory.
    ``universes`` is read once every block is written (the generator may fill it as it goes).
    Everything is written into a temporary sibling folder that replaces ``out`` only when complete,
    so a failure leaves any previous dataset at ``out`` untouched.
    """
    out = Path(out)
    for name in universes:
        check_universe_name(name)
    cal = pd.DatetimeIndex(calendar).as_unit("ns")
    with staging_folder(out) as staging:
        (staging / "calendars").mkdir()
        (staging / "instruments").mkdir()
        (staging / "calendars" / "day.txt").write_text("".join(f"{d:%Y-%m-%d}\n" for d in cal))
        spans = []
        for table in tables:
            frame = validate_table(table, calendar=cal, source=source)
            spans.append(frame.groupby("symbol")["date"].agg(["min", "max"]).reset_index())
            _write_features(staging, frame, cal, progress)
        listed = pd.concat(spans, ignore_index=True).sort_values("symbol", kind="stable")
        if listed.empty:
            raise DataValidationError(f"{source}: the table has no rows")
        listed.columns = ["symbol", "start", "end"]
        _write_instruments(staging / "instruments" / "all.txt", listed)
        for name, members in universes.items():
            check_universe_name(name)
            _write_instruments(staging / "instruments" / f"{name}.txt", members.sort_values(["symbol", "start"]))
        write_meta(staging, meta)
        swap_into_place(staging, out)
    return out


def write_meta(folder: Path, meta: DatasetMeta) -> None:
    """Write ``trade.json`` with a new :attr:`DatasetMeta.stamp`: every writer calls it last, on the complete folder."""
    stamped = meta.model_copy(update={"stamp": uuid.uuid4().hex})
    (folder / META_FILE).write_text(stamped.model_dump_json(indent=2) + "\n")


def check_universe_name(name: str) -> str:
    """A universe name becomes ``instruments/<name>.txt`` and Qlib lower-cases it: allow only what is safe there."""
    if name == "all" or not _UNIVERSE_NAME.fullmatch(name):
        raise DataValidationError(
            f"{name[:80]!r} is not a universe name",
            hint="use up to 64 lower-case letters, digits, '-' or '_', e.g. csi300; 'all' is written from the bars",
        )
    return name


def refuse_foreign_folder(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_dataset(out))):
        raise DatasetError(
            f"{out} exists and is not a trade-agent dataset", hint="choose a new or empty folder for --out"
        )


class _HeldLocks(threading.local):
    """The datasets this thread holds the writer lock of, so that nested writes (import -> write) reuse it."""

    def __init__(self) -> None:
        self.paths: set[Path] = set()


_held = _HeldLocks()


def _beside(out: Path, kind: str) -> list[Path]:
    """``out``'s temporaries of one kind: ``tmp`` (staging) or ``old`` (a retired copy during a swap)."""
    return sorted(out.parent.glob(f".{glob.escape(out.name)}.{kind}-*"))


def _lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.lock"


@contextlib.contextmanager
def dataset_lock(out: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold ``out``'s writer lock: an ``flock`` on ``.NAME.lock`` beside it, freed by the kernel if the writer dies.

    Writers hold it for as long as their temporaries exist, so whoever takes it knows every
    ``.NAME.tmp-*`` / ``.NAME.old-*`` folder was left by a killed writer: it first restores or
    cleans those (:func:`_settle_locked`). The lock file is removed on release. Without ``wait``
    a held lock raises :class:`BlockingIOError`.
    """
    out = Path(out).absolute()
    if out in _held.paths:
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    path = _lock_path(out)
    fd = lock_file(path, wait=wait)
    _held.paths.add(out)
    try:
        _settle_locked(out)
        yield
    finally:
        _held.paths.discard(out)
        path.unlink(missing_ok=True)
        os.close(fd)


def _settle_locked(out: Path) -> None:
    """Finish what a killed writer left; the caller holds the lock, so nothing beside ``out`` is in use.

    A kill between the two renames of :func:`swap_into_place` leaves no ``out`` and the complete
    previous dataset in ``.NAME.old-*``: it is moved back (the killed import never reported
    success). Every other temporary is deleted.
    """
    retired = [folder for folder in _beside(out, "old") if is_dataset(folder)]
    if retired and not out.exists():
        os.replace(max(retired, key=lambda folder: folder.stat().st_mtime), out)
    for leftover in [*_beside(out, "tmp"), *_beside(out, "old")]:
        shutil.rmtree(leftover, ignore_errors=True)


def settle(folder: Path) -> Path:
    """Before reading ``folder``: restore it and remove stale temporaries if a killed writer left any.

    Costs one directory listing when there is nothing to do. A running writer keeps its
    temporaries (its lock is busy, so this returns at once); only one caught between the two
    renames of its swap (no ``folder``, a ``.NAME.old-*`` beside it) is waited for. Where the
    lock cannot be taken (a read-only copy) reads go on.
    """
    folder = Path(folder)
    retired = _beside(folder, "old")
    if retired or _beside(folder, "tmp") or _lock_path(folder).exists():
        with contextlib.suppress(OSError), dataset_lock(folder, wait=bool(retired) and not folder.exists()):
            pass
    return folder


@contextlib.contextmanager
def staging_folder(out: Path) -> Iterator[Path]:
    """A new ``.NAME.tmp-*`` folder beside ``out``, under ``out``'s writer lock; removed on the way out.

    Build the new dataset in it and call :func:`swap_into_place` before leaving the block.
    """
    with dataset_lock(out):
        refuse_foreign_folder(out)
        staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def swap_into_place(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``; an existing ``out`` is retired to ``.NAME.old-*`` first, then deleted.

    A kill between the two renames is undone by the next :func:`dataset_lock` or :func:`settle`.
    """
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


def member_days(members: pd.DataFrame, calendar: pd.DatetimeIndex, symbols: Sequence[str]) -> np.ndarray:
    """Bool [day, symbol]: whether ``members``' intervals cover each symbol on each calendar day."""
    column = {symbol: j for j, symbol in enumerate(symbols)}
    matrix = np.zeros((len(calendar), len(symbols)), dtype=bool)
    for row in members.itertuples():
        j = column.get(row.symbol)
        if j is not None:
            lo, hi = calendar.searchsorted(row.start, side="left"), calendar.searchsorted(row.end, side="right")
            matrix[lo:hi, j] = True
    return matrix


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
