"""`trade eval tasks` with the local policy on CPU: the tiny Qwen3 taught the tool-call format playing --tasks
episodes of a synthetic market's tasks (the compact prompt set, pools of 5-10), all in flight at once, with
--set batch=1 (one generation a reply), 4 and 16, each with the prompt cache on and off (--set prompt_cache_mb:
4096, the default, and 0). Episodes per second and seconds per reply (the run's wall time over the replies it
generated), the first run of each setting (cold: the model loaded, torch's first calls) apart from the later ones
(warm, their median), the settings interleaved run by run so a busy moment of the machine falls on all of them.

    python benchmarks/bench_local_batch.py [--model DIR | --sft-steps 400] [--tasks 16] [--rounds 3] [--max-tokens 64]
        [--batch 1 4 16] [--prompt-cache-mb 4096 0] [--prompt-set compact]

Without --model, the tiny model is built and taught here first (as `trade model tiny --sft-steps 400`: minutes;
--sft-steps 0 leaves it untaught, replies of --max-tokens text without calls).
Greedy (temperature 0), so every batch size plays the same texts; the table says whether they did.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import _common as common

SPLIT = "test=2024-06-01:2024-09-30"


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--model", type=Path, help="a tiny model folder [built and taught here]")
    parser.add_argument("--sft-steps", type=int, default=400, help="steps teaching the model built here")
    parser.add_argument("--tasks", type=int, default=16, help="episodes a run plays, all in flight")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each batch size (the first is cold)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--prompt-cache-mb", type=int, nargs="+", default=[4096, 0], help="0: no prompt cache")
    parser.add_argument("--prompt-set", default="compact", help="compact-en for an English base")
    args = parser.parse_args()

    from trade_core.logging import configure_logging

    configure_logging(level="error")

    from trade_data.store import MarketStore
    from trade_data.synth import write_synthetic_market
    from trade_eval.policy import POLICIES, RunSettings
    from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks
    from trade_reward.schemes import get_scheme
    from trade_reward.taskbuilder import build_tasks

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or _tiny_model(Path(tmp) / "tiny", args.sft_steps)
        data = write_synthetic_market(Path(tmp) / "market", symbols=60, start="2023-01-01", end="2024-12-31")
        build_tasks(
            data, Path(tmp) / "tasks", split=SPLIT, pool_size="5-10", per_day=1, seed=0, prompt_set=args.prompt_set
        )
        records, split, _ = load_tasks(Path(tmp) / "tasks", "test")
        store = MarketStore.load(data)
        evaluation = TasksEval(store, records[: args.tasks], [get_scheme("bucketed")])
        policy = POLICIES.get("local")
        choices = [(batch, memory) for batch in args.batch for memory in args.prompt_cache_mb]
        runs: dict[tuple[int, int], list[tuple[float, int]]] = {choice: [] for choice in choices}
        texts: dict[tuple[int, int], list[str]] = {}
        for round_ in range(args.rounds):
            for batch, memory in choices:
                options = {"batch": batch, "prompt_cache_mb": memory}
                settings = RunSettings(model=str(model), temperature=0, max_tokens=args.max_tokens, options=options)
                out = Path(tmp) / f"run-{batch}-{memory}-{round_}"
                started = time.perf_counter()
                policy.check(settings)  # the first run of a batch size loads its model: part of the cold time
                manifest = new_manifest(
                    evaluation,
                    "local",
                    settings,
                    command=[],
                    tasks=Path(tmp) / "tasks",
                    split=split,
                    servers=[],
                    data=data,
                )
                summary = run_tasks(evaluation, policy, settings, out, manifest, concurrency=args.tasks, progress=False)
                wall = time.perf_counter() - started
                assert summary.played == args.tasks, summary.failure_reasons
                episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
                runs[batch, memory].append((wall, sum(e["requests"] for e in episodes)))
                prompts = sum(e["prompt_tokens"] for e in episodes) / runs[batch, memory][-1][1]
                trajectories = (out / "trajectories.jsonl").read_text().splitlines()
                texts.setdefault((batch, memory), sorted(json.dumps(json.loads(t)["messages"]) for t in trajectories))
    import torch

    same = all(texts[choice] == texts[choices[0]] for choice in choices)
    warm = {choice: statistics.median(wall for wall, _ in timed[1:] or timed) for choice, timed in runs.items()}
    rows = []
    for (batch, memory), timed in runs.items():
        (cold, replies), hot = timed[0], warm[batch, memory]
        rates = [args.tasks / cold, cold / replies, args.tasks / hot, hot / replies]
        cache = f"{memory} MB" if memory else "off"
        speed_up = f"{warm[choices[0]] / hot:.1f}x"
        rows.append([str(batch), cache, str(replies), *(f"{rate:.2f}" for rate in rates), speed_up])
    first = f"batch {choices[0][0]}, prompt cache {choices[0][1] or 'off'}"
    header = (
        f"{common.machine()}, {torch.get_num_threads()} torch threads; load average {load:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; `trade eval tasks --policy local` ({model.name}, {args.tasks} tasks all in "
        f"flight, {args.prompt_set} prompt set, greedy, --max-tokens {args.max_tokens}, {prompts:,.0f} prompt tokens "
        f"a reply), {args.rounds} interleaved runs per setting (the first cold, the median of the rest warm); the "
        f"same texts in every setting: {'yes' if same else 'NO'}"
    )
    columns = [
        "batch",
        "prompt cache",
        "replies a run",
        "cold episodes/s",
        "cold s per reply",
        "warm episodes/s",
        "warm s per reply",
        f"warm speed-up vs {first}",
    ]
    common.report(header, columns, rows, args.write)


def _tiny_model(out: Path, steps: int) -> Path:
    from trade_train.tiny.model import build_tiny_model
    from trade_train.tiny.sft import tune_tool_calls

    build_tiny_model(out)
    if steps:
        tune_tool_calls(out, steps=steps)
    return out


if __name__ == "__main__":
    main()
