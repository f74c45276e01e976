"""benchmarks/bench_dashboard.py runs and prints its table (40 episodes; no timing asserted: figures are for docs/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_dashboard.py"


@pytest.mark.slow
def test_the_dashboard_benchmark_prints_its_table(sample_data: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--data", str(sample_data), "--episodes", "40"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("|")]
    start = rows.index(next(row for row in rows if row.startswith("| what |")))
    pages = rows.index(next(row for row in rows if row.startswith("| request |")))
    assert pages - start == 5, done.stdout  # header, rule, listening, first answer, the full run page
    assert len(rows) - pages == 7, done.stdout  # header, rule, five requests
    assert "a tasks run of 40 episodes" in done.stdout
