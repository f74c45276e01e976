"""Atomic file writes: readers see the old file or the new one, never half of one.

Every writer in trade-agent (plans, manifests, trajectories, task folders) goes through here, so two
writers of one path never share a temporary name and a killed writer leaves only a hidden ``.NAME.tmp-*``.
Writers that must not run two at a time (a dataset's import, a run folder's appends) hold a :func:`lock_file`.
JSONL files grow one whole line at a time, with one write each (:func:`append_line`, an :class:`Appender`), and
are read by :func:`read_jsonl`, which leaves out a last line still being written: a killed writer leaves at most
one partial last line, and no reader crashes on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO


def staging_path(path: Path) -> Path:
    """A hidden temporary name beside ``path``, unique to this writer."""
    return path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")


@contextlib.contextmanager
def atomic_open(path: Path | str, mode: str = "w") -> Iterator[IO]:
    """Open a staging file for writing; on a clean exit it replaces ``path``, on an error it is removed."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_path(path)
    try:
        with open(staging, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)


def atomic_write(path: Path | str, content: str | bytes) -> Path:
    """Write ``content`` to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb" if isinstance(content, bytes) else "w") as handle:
        handle.write(content)
    return Path(path)


def lock_file(path: Path | str, *, wait: bool = True) -> int:
    """A descriptor holding an ``flock`` on the file now at ``path`` (created if missing); close it to release.

    The kernel frees the lock when its process ends, however it ends, so a killed holder's lock is simply
    taken. A holder may remove the file on release: whoever waited on it then locks the file there now.
    Without ``wait`` a held lock raises :class:`BlockingIOError`.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)  # we locked a file its holder removed on release: lock the one there now


def append_line(path: Path, text: str) -> None:
    """Append one line with a single write, flushed and fsynced before returning."""
    with open(path, "ab") as handle:
        handle.write(text.encode("utf-8") + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


class Appender:
    """Appends whole lines to a run's JSONL files, each with one write and a flush (a killed process loses no
    finished line), but fsyncs them at most every ``every`` seconds and on close (a power cut loses at most
    that much): an fsync per line of hundreds of episodes a second costs more than the episodes. The files are
    fsynced in the order they were first written, so a synced record never names an unsynced trajectory."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.handles: dict[Path, BinaryIO] = {}
        self.synced = time.monotonic()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sync()
        for handle in self.handles.values():
            handle.close()

    def append(self, path: Path, text: str) -> None:
        if path not in self.handles:
            self.handles[path] = open(path, "ab")  # noqa: SIM115 - closed in __exit__
        handle = self.handles[path]
        handle.write(text.encode("utf-8") + b"\n")
        handle.flush()
        if time.monotonic() - self.synced >= self.every:
            self.sync()

    def sync(self) -> None:
        for handle in self.handles.values():
            os.fsync(handle.fileno())
        self.synced = time.monotonic()


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file's whole lines: a last line cut short (a writer appending, or killed
    mid-write) is left out, as is a line that is not a JSON object; a missing file has none."""
    lines = read_lines(path)
    if lines and ends_inside_line(path):
        lines.pop()
    values = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(line)
            if isinstance(value, dict):
                values.append(value)
    return values


def ends_inside_line(path: Path) -> bool:
    """Whether the file ends inside a line (a write cut short)."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"
