"""Import a long daily-bar table into a Qlib provider dir, merging into an existing one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import structlog

from trade_data.errors import DatasetError, DataValidationError
from trade_data.info import ending_early
from trade_data.qlib_dir import (
    DatasetMeta,
    check_universe_name,
    dataset_lock,
    is_dataset,
    list_universes,
    member_days,
    read_calendar,
    read_calendar_file,
    read_instruments_file,
    read_meta,
    read_table_back,
    read_universe,
    write_dataset,
)
from trade_data.table import COLUMNS, NUMBERS, china_today, read_table, stored_values, validate_table

log = structlog.get_logger("trade.data.import")
_SHOWN = 3


def import_table(
    source: Path,
    out: Path,
    *,
    calendar_file: Path | None = None,
    universe_files: Mapping[str, Path] | None = None,
    allow_revisions: bool = False,
    allow_drop: bool = False,
    progress: bool = False,
) -> Path:
    """Write ``source`` as a dataset at ``out``; when ``out`` already holds one, merge into it.

    Merging adds the table's new symbols, dates and rows and rewrites every stored row byte for
    byte. A stored row that comes again with other values is a revision of history, refused
    unless ``allow_revisions``; a universe file replaces the stored one, and losing member-days
    that way (or symbols whose bars cannot be read back) is refused unless ``allow_drop``.
    Everything is validated before a byte is written, under the dataset's writer lock.
    """
    source, out = Path(source), Path(out)
    for name in universe_files or {}:
        check_universe_name(name)
    today = china_today()
    calendar = read_calendar_file(calendar_file) if calendar_file else None
    if calendar is not None and calendar[-1] > today:
        future = calendar[calendar > today]
        raise DataValidationError(
            f"{calendar_file}: {len(future)} days after today ({today:%Y-%m-%d} in China); first: {future[0]:%Y-%m-%d}",
            hint="a calendar lists days that have traded: cut it at the last day of the table",
        )
    universes = {name: read_instruments_file(Path(path)) for name, path in (universe_files or {}).items()}
    table = validate_table(read_table(source), calendar=calendar, today=today, source=str(source))
    if table.empty:  # merged, it would rewrite the dataset (and its provenance) to no effect
        raise DataValidationError(f"{source}: the table has no rows", hint=f"a row per bar: {','.join(COLUMNS)}")
    with dataset_lock(out):
        if is_dataset(out):
            table, calendar, universes = _merge_existing(
                out, table, calendar, universes, allow_revisions=allow_revisions, allow_drop=allow_drop
            )
            log.info("import.merge", dataset=str(out), rows=len(table))
        meta = DatasetMeta(source=f"import:{source.name}", parameters={"rows": len(table)})
        write_dataset(
            table, out, meta=meta, calendar=calendar, universes=universes, source=str(source), progress=progress
        )
    last = read_calendar(out)[-1]
    for name, end in ending_early(universes, last).items():
        log.warning(
            "import.universe_ends_early",
            dataset=str(out),
            universe=name,
            ends=f"{end:%Y-%m-%d}",
            data_ends=f"{last:%Y-%m-%d}",
            hint=f"import newer intervals with --universe {name}=FILE",
        )
    log.info("import.done", dataset=str(out), rows=len(table), symbols=table["symbol"].nunique())
    return out


def _merge_existing(
    out: Path,
    table: pd.DataFrame,
    calendar: pd.DatetimeIndex | None,
    universes: dict[str, pd.DataFrame],
    *,
    allow_revisions: bool,
    allow_drop: bool,
) -> tuple[pd.DataFrame, pd.DatetimeIndex, dict[str, pd.DataFrame]]:
    if read_meta(out).synthetic:
        raise DatasetError(f"{out} holds a synthetic market", hint="import real bars into a new folder")
    old_calendar = read_calendar(out)
    old = read_table_back(out)
    count, first = _revisions(old, table)
    if count and not allow_revisions:
        raise DataValidationError(
            f"{count} rows of the table differ from the history in {out}; first: {'; '.join(first)}",
            hint="pass --allow-revisions to replace them, or leave those rows out of the table",
        )
    drops = _drops(out, old, old_calendar, universes)
    if drops and not allow_drop:
        raise DataValidationError(
            f"importing into {out} would drop {'; '.join(drops)}",
            hint="pass --allow-drop to accept that; a universe file replaces the stored one, so give its whole history",
        )
    new_dates = calendar if calendar is not None else pd.DatetimeIndex(table["date"].unique())
    merged_calendar = old_calendar.union(new_dates).sort_values()
    merged = pd.concat([old, table], ignore_index=True).drop_duplicates(["symbol", "date"], keep="last")
    merged_universes = {name: read_universe(out, name) for name in list_universes(out)}
    merged_universes.update(universes)
    return merged, merged_calendar, merged_universes


def _revisions(old: pd.DataFrame, table: pd.DataFrame) -> tuple[int, list[str]]:
    """Rows of ``table`` the dataset holds with other stored values: their count and the first few, described."""
    both = old.merge(table, on=["symbol", "date"], suffixes=("_old", ""))
    before = both[[f"{name}_old" for name in NUMBERS]].set_axis(list(NUMBERS), axis=1)
    stored_before, stored_after = stored_values(before), stored_values(both)
    differs = {
        name: ~(
            (stored_before[name] == stored_after[name]) | (np.isnan(stored_before[name]) & np.isnan(stored_after[name]))
        )
        for name in NUMBERS
    }
    revised = np.flatnonzero(np.logical_or.reduce(list(differs.values())))
    first = [
        f"{both.at[i, 'symbol']} {both.at[i, 'date']:%Y-%m-%d} "
        + ", ".join(
            f"{name} {before.at[i, name]:.7g} -> {both.at[i, name]:.7g}" for name in NUMBERS if differs[name][i]
        )
        for i in revised[:_SHOWN]
    ]
    return len(revised), first


def _drops(
    out: Path, old: pd.DataFrame, calendar: pd.DatetimeIndex, universes: Mapping[str, pd.DataFrame]
) -> list[str]:
    """What writing the merge would lose: listed symbols without readable bars, member-days of replaced universes."""
    listed = read_instruments_file(out / "instruments" / "all.txt")["symbol"]
    unreadable = sorted(set(listed) - set(old["symbol"]))
    drops = (
        [f"{len(unreadable)} symbols without readable bars ({', '.join(unreadable[:_SHOWN])})"] if unreadable else []
    )
    for name in sorted(set(universes) & set(list_universes(out))):
        stored = read_universe(out, name)
        symbols = sorted(set(stored["symbol"]) | set(universes[name]["symbol"]))
        lost = member_days(stored, calendar, symbols) & ~member_days(universes[name], calendar, symbols)
        if lost.any():
            columns = np.flatnonzero(lost.any(axis=0))
            first = ", ".join(f"{symbols[j]} {calendar[lost[:, j].argmax()]:%Y-%m-%d}" for j in columns[:_SHOWN])
            drops.append(f"{lost.sum()} member-days of {len(columns)} symbols from universe {name} (first: {first})")
    return drops
