"""Atomic writes: the old content survives a failed write, and concurrent writers never share a temporary."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from trade_core.files import atomic_open, atomic_write


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = atomic_write(tmp_path / "plan.json", "old")
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("killed midway")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_concurrent_writers_of_one_path_leave_one_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "plan.json"
    texts = [str(i) * 100_000 for i in range(8)]
    threads = [threading.Thread(target=atomic_write, args=(target, text)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert target.read_text() in texts and [p.name for p in target.parent.iterdir()] == ["plan.json"]


def test_bytes_and_modes(tmp_path: Path) -> None:
    assert atomic_write(tmp_path / "b", b"\x00\x01").read_bytes() == b"\x00\x01"
    with pytest.raises(ValueError, match="whole files"):
        atomic_open(tmp_path / "a", "a").__enter__()
