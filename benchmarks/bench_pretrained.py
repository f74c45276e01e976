"""What a pretrained base costs per choice of the quickstart's recipe on this machine (issue 37): the tokens of a
day in each prompt set, a fine-tune step by the layers it trains, and a GRPO group's replies sampled with and
without a shared prompt, each measured in a fresh process (its peak RSS its own), the choices interleaved.

    python benchmarks/bench_pretrained.py --model smollm2 [--batch 8] [--new-tokens 48] [--rounds 2]

--model is a folder `trade model smollm2` wrote. The day is a task of the quickstart's planted-signal market
(compute_alpha_factor and TakeAction, pools of 8), played as its demonstrations play it: the signal ranked, a
buy, stop. A fine-tune step is --batch such days (forward, loss on the replies, backward, AdamW); a group is
--batch replies of --new-tokens sampled tokens on the first turn's prompt, either each row reading the prompt
(what TRL and `--policy local` do) or the prompt read once and its cache shared by the rows. The first round of
each choice is cold (the first calls of torch in that process), the later ones warm.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common

PROMPT_SETS = ("compact", "compact-en")
TOOLS = ["compute_alpha_factor", "TakeAction"]


def days(prompt_set: str, folder: Path, count: int) -> tuple[list, list]:
    """``count`` demonstrations on the quickstart's market in ``prompt_set``, and their tasks' first-turn messages."""
    from trade_data.signals import PlantedSignal
    from trade_data.store import MarketStore
    from trade_data.synth import write_synthetic_market
    from trade_reward.taskbuilder import build_tasks
    from trade_reward.taskfolder import read_records
    from trade_train.quickstart.demonstrations import signal_demonstrations
    from trade_train.quickstart.pipeline import split_spec
    from trade_train.quickstart.settings import SYNTH_END, SYNTH_START

    market = folder / "market"
    if not (market / "trade.json").is_file():
        signal = PlantedSignal.parse("KMID:0.3")
        write_synthetic_market(market, 16, SYNTH_START, SYNTH_END, seed=0, signal=signal)
    store = MarketStore.load(market)
    tasks = folder / f"tasks-{prompt_set}"
    if not (tasks / "manifest.json").is_file():
        spec = split_spec(store, 20)
        build_tasks(market, tasks, split=spec, pool_size="8", seed=0, tools=TOOLS, prompt_set=prompt_set)
    records = read_records(tasks, "train")[:count]
    return signal_demonstrations(store, records, store.planted_signal, seed=0), records


def one(choice: dict, model: Path, scratch: Path) -> dict:
    """Run one measurement in this process; returns its figures."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trade_train.pretrained.sft import freeze_below, render_turns, tune

    batch, tokenizer = choice["batch"], AutoTokenizer.from_pretrained(model)
    demos, records = days(choice["prompt_set"], scratch, batch)
    out: dict = {}
    if choice["kind"] == "tokens":
        prompt = tokenizer.apply_chat_template(
            records[0].prompt, tools=demos[0].tools, add_generation_prompt=True, return_dict=True
        )["input_ids"]
        whole, written = render_turns(tokenizer, demos[0])
        return {"prompt": len(prompt), "day": len(whole), "written": len(written)}
    if choice["kind"] == "tune":
        folder = scratch / f"model-{choice['layers']}"
        if not folder.exists():
            import shutil

            shutil.copytree(model, folder)
        seconds: list[float] = []
        started = time.perf_counter()

        def step(at: int, loss: float) -> None:
            nonlocal started
            seconds.append(time.perf_counter() - started)
            started = time.perf_counter()

        tune(folder, demos, choice["rounds"], batch=batch, train_layers=choice["layers"], progress=step)
        model_ = AutoModelForCausalLM.from_pretrained(folder)
        out = {"seconds": seconds, "trained": freeze_below(model_, choice["layers"])}
    if choice["kind"] == "group":
        from trade_core.cpu_generation import fast_cpu_sampling

        lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        ids = tokenizer.apply_chat_template(
            records[0].prompt, tools=demos[0].tools, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        seconds = []
        for _ in range(choice["rounds"]):
            torch.manual_seed(0)
            started = time.perf_counter()
            with torch.no_grad(), fast_cpu_sampling(threads=None):
                if choice["shared"]:
                    cache = lm(ids[:, :-1], use_cache=True).past_key_values  # generate reads the last token
                    cache.batch_repeat_interleave(batch)
                    rows = ids.repeat(batch, 1)
                    lm.generate(
                        rows,
                        past_key_values=cache,
                        do_sample=True,
                        temperature=0.7,
                        max_new_tokens=choice["new_tokens"],
                        min_new_tokens=choice["new_tokens"],
                    )
                else:
                    lm.generate(
                        ids.repeat(batch, 1),
                        do_sample=True,
                        temperature=0.7,
                        max_new_tokens=choice["new_tokens"],
                        min_new_tokens=choice["new_tokens"],
                    )
            seconds.append(time.perf_counter() - started)
        out = {"seconds": seconds, "prompt": ids.shape[1]}
    out["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--model", type=Path, required=True, help="a folder `trade model smollm2` wrote")
    parser.add_argument("--batch", type=int, default=8, help="days a fine-tune step, replies a group")
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens each reply of a group samples")
    parser.add_argument("--rounds", type=int, default=2, help="fine-tune steps / group samplings per choice")
    parser.add_argument("--one", help=argparse_hidden())
    parser.add_argument("--scratch", type=Path, help=argparse_hidden())
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(json.loads(args.one), args.model, args.scratch)))
        return
    base = {"batch": args.batch, "rounds": args.rounds, "new_tokens": args.new_tokens}
    choices = [
        *({**base, "kind": "tokens", "prompt_set": p} for p in PROMPT_SETS),
        {**base, "kind": "group", "prompt_set": "compact-en", "shared": False},
        {**base, "kind": "group", "prompt_set": "compact-en", "shared": True},
        {**base, "kind": "tune", "prompt_set": "compact-en", "layers": 8},
        {**base, "kind": "tune", "prompt_set": "compact-en", "layers": 0},
        {**base, "kind": "tune", "prompt_set": "compact", "layers": 8},
    ]
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for choice in choices:
            command = [sys.executable, __file__, "--model", str(args.model), "--scratch", scratch, "--one"]
            done = subprocess.run([*command, json.dumps(choice)], capture_output=True, text=True, check=True)
            results.append((choice, json.loads(done.stdout.strip().splitlines()[-1])))
            print(choice, results[-1][1], file=sys.stderr)
    tokens = {c["prompt_set"]: r for c, r in results if c["kind"] == "tokens"}
    rows = []
    for choice, result in results:
        if choice["kind"] == "tokens":
            continue
        cold, warm = result["seconds"][0], statistics.median(result["seconds"][1:] or result["seconds"])
        day = tokens[choice["prompt_set"]]
        if choice["kind"] == "tune":
            what = f"fine-tune step, {args.batch} days, " + (
                f"top {choice['layers']} layers" if choice["layers"] else "every layer"
            )
            rate = f"{args.batch * day['day'] / warm:,.0f} day tokens/s"
        else:
            what = f"group of {args.batch} replies, " + (
                "prompt read once, cache shared" if choice["shared"] else "each row reads the prompt"
            )
            rate = f"{args.batch * args.new_tokens / warm:,.1f} sampled tokens/s"
        rows.append(
            [
                what,
                choice["prompt_set"],
                f"{day['prompt']:,} / {day['day']:,}",
                f"{cold:.1f}",
                f"{warm:.1f}",
                rate,
                f"{result['peak_gb']:.2f}",
            ]
        )
    common.report(
        f"{common.machine()}; model {args.model.name}; {args.rounds} rounds each (the first cold)",
        ["choice", "prompt set", "tokens: first prompt / whole day", "cold s", "warm s", "rate", "peak RSS GB"],
        rows,
        args.write,
    )


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
