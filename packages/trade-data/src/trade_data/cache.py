"""Arrays derived from a dataset, computed once per dataset version and memory-mapped by every reader.

A dataset's bars never change while it is read, so what readers derive from them (the store's
[day, symbol] arrays, trade-tools' indicator tables) is written once as ``.npy`` files and opened with
``mmap_mode="r"``: N processes on a node share one copy in the page cache. The files live in
``DIR/.trade-cache/<name>-<key>/``: a re-import writes a new ``DIR``, so they leave with the old
one, and ``key`` hashes the dataset's small files (``trade.json`` with the stamp every writer puts in it,
the calendar, the instruments) with the deriving code's version. A dataset without a stamp (written
before stamps, or by another tool) adds the size and mtime of every feature file, so an edit in place
invalidates them too. Where ``DIR`` is read-only they go under ``$TRADE_CACHE_DIR`` (default
``~/.cache/trade-agent``).

The first opener builds under an ``flock`` (later openers wait, then map its files) into a unique
temporary folder renamed into place when complete, so a killed builder leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import structlog

from trade_data.qlib_dir import read_meta

log = structlog.get_logger("trade.data.cache")
CACHE_FOLDER = ".trade-cache"
_SMALL_FILES = ("trade.json", "calendars/day.txt")


def dataset_fingerprint(dataset: Path) -> str:
    """A digest that changes with every write of the dataset: its writer's stamp, else every feature file's size and
    mtime (a scan that costs a second per 40,000 files under load)."""
    digest = hashlib.sha256()
    for name in _SMALL_FILES:
        path = dataset / name
        digest.update(f"{name}\0".encode() + (path.read_bytes() if path.is_file() else b"-"))
    for path in sorted((dataset / "instruments").glob("*.txt")):
        digest.update(f"{path.name}\0".encode() + path.read_bytes())
    if read_meta(dataset).stamp:
        return digest.hexdigest()
    features = dataset / "features"
    stats = []
    for folder in os.scandir(features) if features.is_dir() else []:
        for entry in os.scandir(folder.path):
            stat = entry.stat()
            stats.append(f"{folder.name}/{entry.name}\0{stat.st_size}\0{stat.st_mtime_ns}")
    digest.update("\n".join(sorted(stats)).encode())
    return digest.hexdigest()


def cache_root(dataset: Path) -> Path:
    """Where ``dataset``'s derived arrays live: inside it, or under ``$TRADE_CACHE_DIR`` if it is read-only."""
    inside = dataset / CACHE_FOLDER
    with contextlib.suppress(OSError):
        inside.mkdir(exist_ok=True)
        if os.access(inside, os.W_OK):
            return inside
    home = Path(os.environ.get("TRADE_CACHE_DIR", Path.home() / ".cache" / "trade-agent"))
    outside = home / hashlib.sha256(str(dataset.resolve()).encode()).hexdigest()[:16]
    outside.mkdir(parents=True, exist_ok=True)
    return outside


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def cached_arrays(
    dataset: Path, name: str, version: str, build: Callable[[Path], None], *, fingerprint: str
) -> dict[str, np.ndarray]:
    """Every ``*.npy`` that ``build(folder)`` writes, memory-mapped read-only; built once per dataset version.

    ``fingerprint`` is the dataset's :func:`dataset_fingerprint`; ``version`` names the deriving code's
    version: change it when ``build`` would write other values.
    Older builds of ``name`` are deleted once the new one is in place (processes mapping them keep
    their pages until they close).
    """
    root = cache_root(dataset)
    key = hashlib.sha256(f"{fingerprint}\0{version}".encode()).hexdigest()[:16]
    folder = root / f"{name}-{key}"
    if not folder.is_dir():
        with _flock(root / f".{name}.lock"):
            if not folder.is_dir():
                _build(folder, build)
                for stale in root.glob(f"{name}-*"):
                    if stale != folder:
                        shutil.rmtree(stale, ignore_errors=True)
    return {path.stem: _open(path) for path in sorted(folder.glob("*.npy"))}


def _build(folder: Path, build: Callable[[Path], None]) -> None:
    staging = folder.parent / f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        log.info("building derived arrays", folder=str(folder))
        build(staging)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _open(path: Path) -> np.ndarray:
    """A read-only plain ndarray over the file's pages (numpy cannot map an empty array: those are read)."""
    array = np.load(path, mmap_mode="r")
    if array.size == 0:
        return np.load(path)
    return array.view(np.ndarray)


def cached_tables(dataset: Path) -> list[tuple[str, int]]:
    """(folder name, bytes) of every derived-array build stored for ``dataset``."""
    root = dataset / CACHE_FOLDER
    folders = sorted(p for p in root.glob("*-*") if p.is_dir()) if root.is_dir() else []
    return [(p.name, sum(f.stat().st_size for f in p.iterdir())) for p in folders]
