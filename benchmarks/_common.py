"""What every benchmark script shares: arguments, the real-data import, timing and the markdown table."""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "cn-csi300"


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with ``--data`` (the cn-csi300 folder) and ``--write`` (a markdown file)."""
    parse = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--data", type=Path, default=Path(os.environ.get("TRADE_SAMPLE_DATA", DEFAULT_DATA)))
    parse.add_argument("--write", type=Path, help="also write the markdown table to this file")
    return parse


def drop_page_cache() -> None:
    """Write the dirty pages out, then drop the clean ones: nothing of the dataset stays in memory (Linux, root)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as error:
        raise SystemExit(f"error: --drop-caches needs Linux and root ({error.strerror})") from None


def import_sample(data: Path, out: Path) -> Path:
    """The real sample imported as a dataset (with its calendar and csi300 universe) at ``out``."""
    from trade_data.importer import import_table

    return import_table(
        data / "daily.parquet", out, calendar_file=data / "calendar.txt", universe_files={"csi300": data / "csi300.txt"}
    )


def timed(calls: Sequence[Callable[[], object]]) -> list[int]:
    """Nanoseconds of each call, one after the other."""
    samples = []
    for call in calls:
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return samples


def percentiles(samples_ns: Sequence[int]) -> tuple[float, float]:
    """(p50, p99) in microseconds."""
    us = np.array(samples_ns) / 1e3
    return float(np.percentile(us, 50)), float(np.percentile(us, 99))


def machine() -> str:
    return f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def report(header: str, columns: Sequence[str], rows: Sequence[Sequence[str]], write: Path | None) -> None:
    """Print the header and a markdown table, and write both to ``write`` when given."""
    table = [f"| {' | '.join(columns)} |", f"|{' --- |' * len(columns)}", *(f"| {' | '.join(r)} |" for r in rows)]
    text = header + "\n\n" + "\n".join(table) + "\n"
    print(text)
    if write:
        write.write_text(text)
