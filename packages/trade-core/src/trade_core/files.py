"""Atomic file writes: readers see the old file or the new one, never half of one.

Every writer in trade-agent (plans, manifests, trajectories, task folders) goes through here, so two
writers of one path never share a temporary name and a killed writer leaves only a hidden ``.NAME.tmp-*``.
Writers that must not run two at a time (a dataset's import, a run folder's appends) hold a :func:`lock_file`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO


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
