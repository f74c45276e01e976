"""The evaluation benchmarks run and print their table (tiny sizes; no timing is asserted: figures are for docs/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.mark.parametrize(
    ("script", "arguments", "header"),
    [
        ("bench_eval_server.py", ["--days", "2", "--runs", "1", "2", "--latency", "0.01"], "| backtests |"),
        (
            "bench_eval_tasks.py",
            ["--episodes", "4", "--serial-episodes", "2", "--concurrency", "1", "4", "--latency", "0.01"],
            "| concurrency |",
        ),
    ],
)
def test_benchmark_prints_its_table(sample_data: Path, script: str, arguments: list[str], header: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--data", str(sample_data), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith(header) and len(table) == 4, done.stdout  # header, rule, one row per size
