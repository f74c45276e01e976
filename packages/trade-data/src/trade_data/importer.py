"""Import a long daily-bar table into a Qlib provider dir, appending to an existing one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import structlog

from trade_data.qlib_dir import (
    DatasetMeta,
    is_dataset,
    list_universes,
    read_calendar,
    read_calendar_file,
    read_instruments_file,
    read_meta,
    read_table_back,
    read_universe,
    write_dataset,
)
from trade_data.table import read_table, validate_table

log = structlog.get_logger("trade.data.import")


def import_table(
    source: Path,
    out: Path,
    *,
    calendar_file: Path | None = None,
    universe_files: Mapping[str, Path] | None = None,
    progress: bool = False,
) -> Path:
    """Write ``source`` as a dataset at ``out``; when ``out`` already holds one, merge into it.

    Merging keeps the existing bars, calendar and universes and lets the new table win on
    overlapping (symbol, date) rows, so importing a table with newer dates appends them.
    Everything is validated before a byte is written.
    """
    source, out = Path(source), Path(out)
    calendar = read_calendar_file(calendar_file) if calendar_file else None
    universes = {name: read_instruments_file(Path(path)) for name, path in (universe_files or {}).items()}
    table = validate_table(read_table(source), calendar=calendar, source=str(source))
    if is_dataset(out):
        table, calendar, universes = _merge_existing(out, table, calendar, universes)
        log.info("import.merge", dataset=str(out), rows=len(table))
    meta = DatasetMeta(source=f"import:{source.name}", parameters={"rows": len(table)})
    write_dataset(table, out, meta=meta, calendar=calendar, universes=universes, source=str(source), progress=progress)
    log.info("import.done", dataset=str(out), rows=len(table), symbols=table["symbol"].nunique())
    return out


def _merge_existing(
    out: Path, table: pd.DataFrame, calendar: pd.DatetimeIndex | None, universes: dict[str, pd.DataFrame]
) -> tuple[pd.DataFrame, pd.DatetimeIndex, dict[str, pd.DataFrame]]:
    if read_meta(out).synthetic:
        from trade_data.errors import DatasetError

        raise DatasetError(f"{out} holds a synthetic market", hint="import real bars into a new folder")
    old_calendar = read_calendar(out)
    new_dates = calendar if calendar is not None else pd.DatetimeIndex(table["date"].unique())
    merged_calendar = old_calendar.union(new_dates).sort_values()
    old = read_table_back(out)
    merged = pd.concat([old, table], ignore_index=True).drop_duplicates(["symbol", "date"], keep="last")
    merged_universes = {name: read_universe(out, name) for name in list_universes(out)}
    merged_universes.update(universes)
    return merged, merged_calendar, merged_universes
