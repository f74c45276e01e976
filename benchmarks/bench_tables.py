"""What a dataset's derived tables cost: their size on disk beside the bars they come from, and building them.

    python benchmarks/bench_tables.py [--data ../shared/data/cn-csi300] [--dataset DIR ...] [--drop-caches]

Each dataset (the real sample imported into a temporary folder, or each ``--dataset``, e.g. the whole market from
`trade data synth --symbols 5500 --start 2006-01-01 --end 2025-12-31`) is hard-linked into a temporary folder
without its ``.trade-cache``, and a fresh process builds every derived table there as the writers do
(``trade_data.bar_tables.precompute``): the store's [day, symbol] arrays, the summary's per-day tables and every
registered bar table. The table gives each one's size, their sum over the bars' (the ``features`` folder's .bin
files), the build's wall time, its peak resident memory (``ru_maxrss``: file-backed pages of the memory-mapped
outputs included) and the peak of its own (anonymous) memory, sampled from ``/proc`` every 50 ms.
``--drop-caches`` drops the page cache before each build (root), so the build reads the bars from the disk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common

BUILD = (
    "import sys; from pathlib import Path; from trade_data.bar_tables import precompute; precompute(Path(sys.argv[1]))"
)


def _mb(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 10e6 else f"{size / 1e6:,.1f} MB"


def _anonymous_kb(pid: int) -> int:
    """The process's own resident memory (RssAnon), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((line for line in status.splitlines() if line.startswith("RssAnon:")), "RssAnon: 0 kB")
    return int(line.split()[1])


def build(dataset: Path, drop_caches: bool) -> tuple[float, int, int]:
    """(seconds, peak RSS bytes, peak anonymous bytes) of building ``dataset``'s tables in a fresh process."""
    if drop_caches:
        common.drop_page_cache()
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", BUILD, str(dataset)], stderr=subprocess.DEVNULL)
    anonymous = 0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        anonymous = max(anonymous, _anonymous_kb(child.pid))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"building the tables of {dataset} failed ({os.waitstatus_to_exitcode(status)})")
    return seconds, usage.ru_maxrss * 1024, anonymous * 1024


def measure(name: str, source: Path, scratch: Path, drop_caches: bool) -> list[str]:
    from trade_data.cache import CACHE_FOLDER, cached_tables
    from trade_data.qlib_dir import require_dataset

    require_dataset(source)
    copy = scratch / name
    shutil.copytree(source, copy, copy_function=os.link, ignore=shutil.ignore_patterns(CACHE_FOLDER))
    seconds, peak, anonymous = build(copy, drop_caches)
    bars = sum(path.stat().st_size for path in (copy / "features").rglob("*.bin"))
    tables = {folder.rsplit("-", 1)[0]: size for folder, size in cached_tables(copy)}
    derived = sum(tables.values())
    shown = ", ".join(f"{table} {_mb(size)}" for table, size in tables.items())
    return [
        name,
        _mb(bars),
        shown,
        f"{_mb(derived)} ({derived / bars:.2f}x)",
        f"{seconds:.1f} s",
        f"{peak / 1e9:.2f} / {anonymous / 1e9:.2f} GB",
    ]


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--dataset", type=Path, action="append", default=[], help="an existing dataset (repeatable)")
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache before each build (root)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        sources = [(path.name, path) for path in args.dataset]
        if not sources:
            sources = [("real sample", common.import_sample(args.data, scratch / "imported"))]
        for name, source in sources:
            rows.append(measure(name.replace(" ", "-"), source, scratch, args.drop_caches))
    header = (
        f"{common.machine()}; load average {os.getloadavg()[0]:.1f} at the end; "
        f"page cache {'dropped' if args.drop_caches else 'as found'} before each build"
    )
    columns = ["dataset", "bars", "derived tables", "all derived (x the bars)", "build", "build peak RSS / own"]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    from trade_core.errors import TradeError

    try:
        main()
    except TradeError as error:  # not a dataset, no sample to import
        sys.exit(f"error: {error.one_line()}")
