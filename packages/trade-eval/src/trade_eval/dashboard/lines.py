"""Byte offsets of the lines of a JSONL file that grows: open line *k* without reading the lines before it.

A run folder's JSONL files only grow by whole lines (or are rewritten shorter by ``--resume``). The index reads
each new byte once: :meth:`LineIndex.refresh` scans from where the last scan stopped, and starts over when the
file got shorter or was replaced. A last line without its newline is a write in progress and is not indexed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CHUNK = 1 << 20
_ID = re.compile(rb'"id"\s*:\s*"([^"\\]+)"')
ID_WINDOW = 200
"""Trajectory JSON starts with its version and id: the id is read from the line's first bytes, not parsed."""


class LineIndex:
    """Offsets of the complete lines of one file, extended as it grows."""

    def __init__(self, path: Path, *, keyed: bool = False) -> None:
        """``keyed``: also map each line's leading ``"id"`` to its number (trajectories files)."""
        self.path = path
        self.keyed = keyed
        self.generation = 0
        """Counts the restarts (the file shrank or was replaced): lines read before belong to another file."""
        self.identity: tuple[int, int] | None = None
        self._reset()

    def _reset(self) -> None:
        self.generation += 1
        self.keys: dict[str, int] = {}
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.scanned = 0
        self.partial = False
        """Whether the file ends inside a line (being written, or a write cut short)."""

    def refresh(self) -> bool:
        """Index what was appended since the last call; returns whether anything changed."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            changed = self.scanned > 0 or self.partial
            if changed:
                self._reset()
            return changed
        identity = (stat.st_ino, stat.st_dev)
        if identity != self.identity or stat.st_size < self.scanned:
            self._reset()
            self.identity = identity
        if stat.st_size == self.scanned:
            return False
        with open(self.path, "rb") as handle:
            handle.seek(self.scanned)
            start = self.scanned
            position = self.scanned
            rest = b""
            while chunk := handle.read(CHUNK):
                data = rest + chunk
                base = position - len(rest)
                cut = 0
                while (newline := data.find(b"\n", cut)) != -1:
                    if data[cut:newline].strip():
                        if self.keyed and (key := leading_id(data[cut : min(newline, cut + ID_WINDOW)])):
                            self.keys[key] = len(self.starts)
                        self.starts.append(base + cut)
                        self.ends.append(base + newline)
                    cut = newline + 1
                rest = data[cut:]
                position += len(chunk)
                start = position - len(rest)
        self.scanned = start
        self.partial = bool(rest.strip())
        return True

    def __len__(self) -> int:
        return len(self.starts)

    def read(self, number: int) -> bytes:
        """Line ``number`` (0-based among the non-blank complete lines), without its newline."""
        with open(self.path, "rb") as handle:
            handle.seek(self.starts[number])
            return handle.read(self.ends[number] - self.starts[number])

    def read_from(self, number: int) -> list[bytes]:
        """Lines ``number`` to the last indexed one, in one read."""
        if number >= len(self.starts):
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.starts[number])
            data = handle.read(self.ends[-1] - self.starts[number])
        return [
            data[s - self.starts[number] : e - self.starts[number]]
            for s, e in zip(self.starts[number:], self.ends[number:], strict=True)
        ]


def leading_id(head: bytes) -> str | None:
    """The ``"id"`` a JSON object states among its first bytes (a Trajectory's second field)."""
    found = _ID.search(head)
    return found.group(1).decode("utf-8", "replace") if found else None
