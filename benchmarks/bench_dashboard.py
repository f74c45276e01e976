"""`trade eval dashboard` over a tasks run of 10,000 episodes: time until it listens, until it answers the run's
page (while the run is read in the background) and until that page has all its figures; then each page cold
(its first request in the process) and warm (best of 3), and after the run grew; the load average beside each.

    python benchmarks/bench_dashboard.py [--data ../shared/data/cn-csi300] [--episodes 10000] [--write FILE]

The episodes are real: a tasks run of the real data played by the engine with a chatty momentum policy (it reads
the prompts and fetches price data for three stocks before trading, as a model does), whose records are then
repeated with fresh ids up to --episodes (the engine would take minutes to play them all; the dashboard only
reads lines). Each figure is the wall time of one HTTP request to the real server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import _common as common

PLAYED = 60
"""Episodes the engine plays; the rest are copies of them with fresh ids."""


def build_run(dataset: Path, out: Path, episodes: int) -> tuple[int, int]:
    """A tasks run of ``episodes`` episodes at ``out``; returns (trajectories bytes, episodes bytes)."""
    from trade_data.store import MarketStore
    from trade_eval.policies.baselines import Momentum
    from trade_eval.policy import DayUsage, RunSettings
    from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks
    from trade_records.runfolder import EPISODES
    from trade_reward.schemes import get_scheme
    from trade_reward.taskbuilder import build_tasks
    from trade_tools.day import TradingDay

    class Chatty(Momentum):
        name = "chatty"
        reads_prompt = True

        async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
            calls = [("get_price_data", json.dumps({"symbol": s})) for s in day.episode.task.pool[:3]]
            day.turn("<think>先看看三只股票的行情，再按动量调仓。</think>查看行情", calls)
            return await super().play(day, settings)

    tasks = out.parent / "tasks"
    build_tasks(dataset, tasks, split="test=2025-07-01:2025-09-30", pool_size="20", per_day=1, seed=0)
    store = MarketStore.load(dataset)
    records, split, _ = load_tasks(tasks, "test")
    evaluation = TasksEval(
        store, records[: min(PLAYED, episodes)], [get_scheme("bucketed"), get_scheme("continuous")], 1
    )
    settings = RunSettings(model="chatty")
    manifest = new_manifest(
        evaluation, "chatty", settings, command=[], tasks=tasks, split=split, servers=(), data=dataset
    )
    run_tasks(evaluation, Chatty(), settings, out, manifest, servers=(), concurrency=8, progress=False)
    trajectories = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    lines = (out / EPISODES).read_text(encoding="utf-8").splitlines()
    by_id = {json.loads(t)["id"]: t for t in trajectories}
    with open(out / "trajectories.jsonl", "a", encoding="utf-8") as t, open(out / EPISODES, "a") as e:
        for number in range(len(lines), episodes):
            record = json.loads(lines[number % len(lines)])
            new = uuid.uuid4().hex
            trajectory = by_id[record["trajectory_id"]].replace(record["trajectory_id"], new, 1)
            record.update(trajectory_id=new, sample=number // len(lines))
            t.write(trajectory + "\n")
            e.write(json.dumps(record, ensure_ascii=False) + "\n")
    return (out / "trajectories.jsonl").stat().st_size, (out / EPISODES).stat().st_size


def get(url: str) -> tuple[float, str]:
    """Seconds for one GET, body read, and the body."""
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read().decode("utf-8")
        assert response.status == 200
    return time.perf_counter() - start, body


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    parse = common.parser(__doc__)
    parse.add_argument("--episodes", type=int, default=10_000)
    args = parse.parse_args()

    from trade_core.logging import configure_logging

    configure_logging(level="warning")
    with tempfile.TemporaryDirectory() as tmp:
        dataset = common.import_sample(args.data, Path(tmp) / "Q")
        run = Path(tmp) / "runs" / "tasks-10k"
        sizes = build_run(dataset, run, args.episodes)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        trade = Path(sys.executable).with_name("trade")
        started = time.perf_counter()
        server = subprocess.Popen(
            [str(trade), "eval", "dashboard", "--runs", str(run.parent), "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            server.stdout.readline()  # type: ignore[union-attr]  (listening)
            listening = time.perf_counter() - started
            start_rows = [["listening", f"{listening:.2f} s", load()]]
            seconds, body = get(base + "/run?run=tasks-10k")
            reading = 'id="reading"' in body
            start_rows.append(
                [
                    f"first answer, the run page ({'still reading' if reading else 'full'})",
                    f"{seconds * 1e3:,.0f} ms",
                    load(),
                ]
            )
            while 'id="reading"' in body:
                time.sleep(0.05)
                body = get(base + "/run?run=tasks-10k")[1]
            start_rows.append(["the run page with all its figures", f"{time.perf_counter() - started:.2f} s", load()])
            middle = args.episodes // 2
            pages = [
                ("run list `/`", "/"),
                (f"run page (first 200 of {args.episodes:,} rows)", "/run?run=tasks-10k"),
                (f"one episode `/day?n={middle}`", f"/day?run=tasks-10k&n={middle}"),
                ("failed episodes filter", "/run?run=tasks-10k&show=failed"),
            ]
            rows = []
            for name, path in pages:
                cold = get(base + path)[0]
                warm = min(get(base + path)[0] for _ in range(3))
                rows.append([name, f"{cold * 1e3:,.0f}", f"{warm * 1e3:,.0f}", load()])
            with open(run / "episodes.jsonl", "rb") as handle:
                last = handle.read().splitlines()[-1]
            with open(run / "episodes.jsonl", "ab") as handle:
                handle.write(last + b"\n")
            grown = get(base + "/run?run=tasks-10k")[0]
            rows.append(["run page after one more line was appended", f"{grown * 1e3:,.0f}", "–", load()])
        finally:
            server.terminate()
            server.wait(30)
    header = (
        f"## trade eval dashboard: a tasks run of {args.episodes:,} episodes\n\n"
        f"trajectories.jsonl {sizes[0] / 2**20:,.0f} MiB, episodes.jsonl {sizes[1] / 2**20:,.1f} MiB. "
        f"{common.machine()}\n\nFrom `trade eval dashboard` starting (a fresh process; the run is read in the "
        "background):\n\n| what | after | load (1 min) |\n| --- | --- | --- |\n"
        + "\n".join(f"| {' | '.join(r)} |" for r in start_rows)
        + "\n\nEach page once the run is read: cold = its first request in the process, warm = best of 3."
    )
    common.report(header, ["request", "cold ms", "warm ms (best of 3)", "load (1 min)"], rows, args.write)


if __name__ == "__main__":
    main()
