"""Decoding a batch of replies on CPU from the prompt cache (`--policy local`, prefix-grpo): how long joining the
rows' cached prompts into one batch takes, and a decode step, with the opening every row shares held once and
attended to once for the batch, or each row held whole (left-padded), by the rows in the batch.

    python benchmarks/bench_decode.py --model DIR [--batch 8 16 32] [--opening 1144] [--own 400 600]
        [--steps 40] [--rounds 2]

--model is a folder `trade model smollm2` wrote (any causal LM of attention layers runs). The prompts are random
token ids: --opening shared by every row (1,144 is the compact-en day's system prompt and tool schemas for
SmolLM2), then each row's own, spread over --own (a day's first prompt adds ~220, its second ~500). Greedy, every row
decoding --steps tokens; both layouts write the same tokens (the table says whether they did). Each measurement is a
fresh process, the layouts interleaved round by round; the first round is cold (torch's first calls, fresh memory).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import _common as common

LAYOUTS = {"opening once": True, "each row whole": False}


def measure(model: str, batch: int, opening: int, own: tuple[int, int], steps: int, share: bool) -> dict:
    """One fresh process: the prompts read into the cache, then joined and decoded (seconds of each)."""
    import time

    import torch
    from transformers import AutoModelForCausalLM

    from trade_core.cpu_generation import grouped_attention
    from trade_core.prompt_cache import PromptCache

    loaded = grouped_attention(AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)).eval()
    draw = torch.Generator().manual_seed(0)
    start = torch.randint(100, 40000, (opening,), generator=draw).tolist()
    lengths = torch.linspace(own[0], own[1], batch).long().tolist()
    prompts = [start + torch.randint(100, 40000, (n,), generator=draw).tolist() for n in lengths]
    cache = PromptCache(loaded)
    with torch.no_grad():
        for prompt in prompts:
            cache.layers(prompt[:-1])
        began = time.perf_counter()
        ids, mask, kv = cache.joined(prompts, 0, room=steps, share_opening=share)
        joined = time.perf_counter() - began
        began = time.perf_counter()
        out = loaded.generate(
            input_ids=ids,
            attention_mask=mask,
            past_key_values=kv,
            do_sample=False,
            max_new_tokens=steps,
            min_new_tokens=steps,
            pad_token_id=0,
        )
        decode = time.perf_counter() - began
    return {"join": joined, "decode": decode, "tokens": out[:, ids.shape[1] :].tolist()}


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--model", required=True, help="a model folder (`trade model smollm2`)")
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--opening", type=int, default=1144, help="tokens every row's prompt opens with")
    parser.add_argument("--own", type=int, nargs=2, default=[400, 600], help="each row's own tokens, from-to")
    parser.add_argument("--steps", type=int, default=40, help="decode steps (greedy tokens a row)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setting (the first is cold)")
    parser.add_argument("--one", help="internal: measure one setting (JSON) in this process")
    args = parser.parse_args()
    if args.one:
        setting = json.loads(args.one)
        print(json.dumps(measure(args.model, **setting)))
        return
    runs: dict[tuple[int, str], list[dict]] = {}
    for _ in range(args.rounds):
        for batch in args.batch:
            for layout, share in LAYOUTS.items():
                setting = {"batch": batch, "opening": args.opening, "own": args.own, "steps": args.steps}
                command = [
                    sys.executable,
                    __file__,
                    "--model",
                    args.model,
                    "--one",
                    json.dumps(setting | {"share": share}),
                ]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                runs.setdefault((batch, layout), []).append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = []
    for (batch, layout), measured in runs.items():
        cold, warm = measured[0], measured[1:] or measured
        step = statistics.median(m["decode"] for m in warm) / args.steps
        same = measured[0]["tokens"] == runs[(batch, "opening once")][0]["tokens"]
        rows.append(
            [
                str(batch),
                layout,
                f"{cold['join']:.2f}",
                f"{statistics.median(m['join'] for m in warm):.2f}",
                f"{cold['decode'] / args.steps:.3f}",
                f"{step:.3f}",
                f"{batch / step:.0f}",
                "yes" if same else "no",
            ]
        )
    columns = ["rows", "layout", "cold join s", "warm join s", "cold s/step", "warm s/step", "warm tokens/s", "same"]
    header = (
        f"{common.machine()}; {args.opening} shared + {args.own[0]}-{args.own[1]} own prompt tokens a row, "
        f"{args.steps} greedy decode steps, {args.rounds} rounds"
    )
    common.report(header, columns, rows, args.write)


if __name__ == "__main__":
    main()
