"""The store-at-scale benchmark (memory-mapped store and indicator tables, N workers) runs and prints its tables
(tiny synthetic market; no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow
def test_bench_store_scale_prints_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench_store_scale.py"),
            "--sizes",
            "30x1",
            "--workers",
            "2",
            "--calls",
            "5",
            "--qlib-calls",
            "0",
            "--cli-runs",
            "1",
            "--write",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    tables = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert tables[0].startswith("| dataset |") and tables[2].startswith("| 30x1 (33 symbols")
    assert "| get_price_data (6 indicators) |" in done.stdout and "| trade tools call get_price_data |" in done.stdout
    assert out.read_text().strip() in done.stdout  # the tables written are the ones printed
