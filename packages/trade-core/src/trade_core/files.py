"""Atomic file writes: readers see the old file or the new one, never half of one.

Every writer in trade-agent (plans, manifests, trajectories, task folders) goes through here, so two
writers of one path never share a temporary name and a killed writer leaves only a hidden ``.NAME.tmp-*``.
"""

from __future__ import annotations

import contextlib
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
