"""The evaluation benchmarks run and print their table (tiny sizes; no timing is asserted: figures are for docs/)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
NO_TORCH = any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "trade_train"))


@pytest.mark.parametrize(
    ("script", "arguments", "header", "rows"),
    [
        ("bench_eval_server.py", ["--days", "2", "--runs", "1", "2", "--latency", "0.01"], "| backtests |", 2),
        (
            "bench_eval_tasks.py",
            ["--episodes", "4", "--serial-episodes", "2", "--concurrency", "1", "4", "--latency", "0.01"],
            "| concurrency |",
            2,
        ),
        (
            "bench_eval_tasks.py",
            ["--policy", "momentum", "--episodes", "4", "--samples", "2", "--concurrency", "4", "--workers", "1", "2"],
            "| concurrency |",
            2,
        ),
        ("bench_anonymize.py", ["--calls", "3"], "| call |", 3),
        ("bench_tool_tail.py", ["--calls", "40", "--busy", "1"], "| pass |", 5),
        ("bench_tables.py", [], "| dataset |", 1),
        pytest.param(
            "bench_local_batch.py",
            [
                *("--sft-steps", "0", "--tasks", "2", "--batch", "1", "2", "--rounds", "1", "--max-tokens", "4"),
                *("--prompt-cache-mb", "4096"),
            ],
            "| batch |",
            2,
            marks=pytest.mark.skipif(NO_TORCH, reason="needs torch, transformers, trade-train[tiny]"),
        ),
    ],
)
def test_benchmark_prints_its_table(
    sample_data: Path, script: str, arguments: list[str], header: str, rows: int
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--data", str(sample_data), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith(header) and len(table) == 2 + rows, done.stdout  # header, rule, the rows
