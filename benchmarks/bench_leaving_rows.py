"""Rows that ended leaving a generating batch (`--policy local`, prefix-grpo's rollouts): a quickstart's held-out
tasks played by one of its models as its evaluate stage plays them (sampled at its temperature, --samples per task,
its reply budget and batch, bfloat16 where the CPU has it), with the ended rows leaving the batch every --chunk tokens,
and with one ``generate`` a batch (--chunk equal to the reply budget: the longest row keeps every row decoding).

    python benchmarks/bench_leaving_rows.py --run OUT [--side untrained] [--tasks 16] [--samples 4]
        [--chunk 16 192] [--rounds 2]

--run is a `trade quickstart --out OUT` folder whose model stage has run (``--side trained`` needs its grpo stage).
The chunk sizes are interleaved round by round, each run in this process with the model loaded once (the first
run of all is cold). Each row samples from its own seed, so the runs write the same texts up to the last bits a
batch's shape gives its float sums; the table counts the replies that differ.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import _common as common


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--run", type=Path, required=True, help="a `trade quickstart --out` folder")
    parser.add_argument("--side", choices=["untrained", "trained"], default="untrained")
    parser.add_argument("--tasks", type=int, default=16, help="held-out tasks a run plays")
    parser.add_argument("--samples", type=int, default=4, help="episodes per task")
    parser.add_argument("--chunk", type=int, nargs="+", default=[16, 192], help="tokens between looks for ended rows")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from trade_core.cpu_generation import cpu_precision
    from trade_core.logging import configure_logging

    configure_logging(level="error")

    from trade_data.store import MarketStore
    from trade_eval.policies import local
    from trade_eval.policy import POLICIES, RunSettings
    from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks
    from trade_reward.schemes import get_scheme
    from trade_train.quickstart.settings import QuickstartSettings

    state = json.loads((args.run / "quickstart.json").read_text())
    recipe = QuickstartSettings(**state["settings"]).recipe
    finished = state["finished"]
    model = finished["grpo" if args.side == "trained" else "model"]["result"]["model"]
    data = Path(finished["market"]["result"]["data"])
    records, split, _ = load_tasks(Path(finished["tasks"]["result"]["tasks"]), "test")
    store = MarketStore.load(data)
    evaluation = TasksEval(store, records[: args.tasks], [get_scheme("continuous")], args.samples)
    settings = RunSettings(
        model=model,
        temperature=state["settings"]["temperature"],
        max_tokens=recipe.max_tokens,
        seed=0,
        options={"batch": recipe.eval_batch, "precision": recipe.precision},
    )
    policy = POLICIES.get("local")
    load = os.getloadavg()[0]
    runs: dict[int, list[float]] = {chunk: [] for chunk in args.chunk}
    texts: dict[int, list[str]] = {}
    tokens: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        policy.check(settings)  # loads the model once, for every run
        load_seconds = time.perf_counter() - started
        for round_ in range(args.rounds):
            for chunk in args.chunk:
                local.CHUNK = chunk  # read at each generation
                out = Path(tmp) / f"run-{chunk}-{round_}"
                manifest = new_manifest(
                    evaluation, "local", settings, command=[], tasks=args.run, split=split, servers=[], data=data
                )
                started = time.perf_counter()
                summary = run_tasks(evaluation, policy, settings, out, manifest, progress=False)
                runs[chunk].append(time.perf_counter() - started)
                assert summary.played == args.tasks * args.samples, summary.failure_reasons
                episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
                tokens[chunk] = statistics.fmean(e["completion_tokens"] / e["requests"] for e in episodes)
                replies = [
                    json.dumps(m)
                    for line in (out / "trajectories.jsonl").read_text().splitlines()
                    for m in json.loads(line)["messages"]
                    if m["role"] == "assistant"
                ]
                texts.setdefault(chunk, sorted(replies))
    first = args.chunk[0]
    rows = []
    for chunk, walls in runs.items():
        differ = sum(a != b for a, b in zip(texts[chunk], texts[first], strict=False))
        speed_up = statistics.median(runs[args.chunk[-1]]) / statistics.median(walls)
        rows.append(
            [
                str(chunk),
                " / ".join(f"{wall:.1f}" for wall in walls),
                f"{statistics.median(walls):.1f}",
                f"{tokens[chunk]:.0f}",
                f"{differ} of {len(texts[chunk])}",
                f"{speed_up:.2f}x",
            ]
        )
    header = (
        f"{common.machine()}; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after; the {args.side} model "
        f"of {args.run.name} (loaded in {load_seconds:.1f} s) on {args.tasks} held-out tasks x {args.samples} samples, "
        f"temperature {settings.temperature}, --max-tokens {recipe.max_tokens}, batch {recipe.eval_batch}, "
        f"{cpu_precision(recipe.precision)}; {args.rounds} rounds, chunk sizes interleaved"
    )
    columns = [
        "chunk (tokens)",
        "seconds per run (rounds)",
        "median s",
        "completion tokens a reply",
        f"replies unlike chunk {first}'s",
        f"speed-up vs chunk {args.chunk[-1]}",
    ]
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
