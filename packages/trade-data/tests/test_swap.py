"""An import killed with SIGKILL at any point of its swap leaves a dataset the next load restores and cleans up."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trade_data.importer import import_table
from trade_data.info import dataset_info
from trade_data.qlib_dir import dataset_lock
from trade_data.store import MarketStore

HEADER = "date,symbol,open,high,low,close,volume,factor\n"
FIRST = HEADER + "2024-01-02,SH600000,10.00,10.50,9.90,10.20,100000,1.5\n"
NEWER = HEADER + "2024-01-03,SH600000,10.20,10.40,10.00,10.10,120000,1.5\n"

KILLED_IMPORT = textwrap.dedent(
    """
    import os, shutil, signal, sys
    from pathlib import Path

    from trade_data.importer import import_table

    # Die by SIGKILL at the n-th step of the swap: 1 and 2 are its renames, 3 the removal of the old copy.
    steps, die_at = [], int(sys.argv[3])

    def step(real):
        def call(*args, **kwargs):
            steps.append(real.__name__)
            if len(steps) == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call

    os.replace, shutil.rmtree = step(os.replace), step(shutil.rmtree)
    import_table(Path(sys.argv[1]), Path(sys.argv[2]))
    """
)


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name.split("-")[0] for p in out.parent.glob(f".{out.name}.*"))


@pytest.mark.parametrize(
    ("die_at", "last_date"),
    [(1, "2024-01-02"), (2, "2024-01-02"), (3, "2024-01-03")],
    ids=["before-the-swap", "between-the-renames", "before-removing-the-old-copy"],
)
def test_import_killed_in_the_swap_is_settled_by_the_next_load(tmp_path: Path, die_at: int, last_date: str) -> None:
    (tmp_path / "first.csv").write_text(FIRST)
    (tmp_path / "newer.csv").write_text(NEWER)
    out = import_table(tmp_path / "first.csv", tmp_path / "ds")
    child = subprocess.run(
        [sys.executable, "-c", KILLED_IMPORT, str(tmp_path / "newer.csv"), str(out), str(die_at)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = _leftovers(out)
    assert (
        left == {1: [".ds.lock", ".ds.tmp"], 2: [".ds.lock", ".ds.old", ".ds.tmp"], 3: [".ds.lock", ".ds.old"]}[die_at]
    )
    assert out.exists() == (die_at != 2)  # between the renames there is no dataset at ds
    store = MarketStore.load(out)
    assert str(store.calendar[-1].date()) == last_date  # the old dataset, or the new one once it was in place
    assert _leftovers(out) == []
    import_table(tmp_path / "newer.csv", out)
    assert dataset_info(out).last_date == "2024-01-03" and _leftovers(out) == []


def test_temporaries_of_a_running_writer_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "first.csv").write_text(FIRST)
    out = import_table(tmp_path / "first.csv", tmp_path / "ds")
    with dataset_lock(out):  # a writer at work: its staging folder is in use
        staging = tmp_path / ".ds.tmp-inuse"
        staging.mkdir()
        (staging / "calendars").mkdir()
        assert dataset_info(out).last_date == "2024-01-02"
        MarketStore.load(out)
        assert staging.is_dir()
    MarketStore.load(out)  # the writer is gone: what it left is stale
    assert _leftovers(out) == []
