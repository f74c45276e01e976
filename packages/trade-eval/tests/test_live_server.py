"""A real OpenAI-compatible server: the tiny Qwen3 taught the tool-call format (`trade model tiny --sft-steps`),
served by `transformers serve` on 127.0.0.1, and a 5-day `trade eval backtest --policy llm` on the real data.

Needs torch, trade-train[tiny] and transformers[serving] (`tox -e eval`); skipped where they are absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from trade_eval.testing import served_backtest
from trade_tools.episode import DEFAULT_TOOLS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "fastapi", "uvicorn")),
        reason="needs torch and transformers[serving] (tox -e eval)",
    ),
]
STARTUP_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`transformers serve` of the tiny model on a free port of 127.0.0.1: its OpenAI base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    command = [str(Path(sys.executable).with_name("transformers")), "serve", str(tiny_model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert process.poll() is None, f"transformers serve exited: {log.read_text()[-2000:]}"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"no answer in {STARTUP_S} s: {log.read_text()[-2000:]}"
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_five_day_backtest_against_the_served_tiny_model(
    server: str, tiny_model: Path, sample_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    options = ("--temperature", "0", "--max-tokens", "160")
    run = served_backtest(server, str(tiny_model), sample_dataset, out, days=5, turns=3, options=options)
    assert run.code == 0, run.err
    days = [json.loads(line) for line in (out / "days.jsonl").read_text().splitlines()]
    assert [d["date"] for d in days] == ["2025-06-20", "2025-06-23", "2025-06-24", "2025-06-25", "2025-06-26"]
    assert all(d["status"] == "done" for d in days), [d["reason"] for d in days]  # the server answered every day
    assert all(d["requests"] >= 1 and d["prompt_tokens"] > 1000 for d in days)
    trajectories = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert [t["id"] for t in trajectories] == [d["trajectory_id"] for d in days]
    calls = [
        call["function"]
        for t in trajectories
        for m in t["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]
    assert calls and {c["name"] for c in calls} <= set(DEFAULT_TOOLS)  # parsed by the server, run by the Episode
    assert all(isinstance(json.loads(c["arguments"]), dict) for c in calls)
    assert sum(d["tool_calls"] for d in days) == len(calls)
