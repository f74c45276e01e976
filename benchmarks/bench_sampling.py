"""Sampling one token from a Qwen3-sized vocabulary on CPU: torch.multinomial against the inverse-CDF sampler the
local policy and trl-grpo use (trade_core.cpu_generation), per batch size, cold (first call) and warm (p50/p99),
the two interleaved call by call so a busy moment of the machine falls on both.

    python benchmarks/bench_sampling.py [--rounds 200]
"""

from __future__ import annotations

import time

import torch
from _common import machine, parser, percentiles, report

from trade_core.cpu_generation import inverse_cdf_sample

VOCAB = 151_936


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--rounds", type=int, default=200)
    args = parse.parse_args()
    rows = []
    for batch in (1, 16):
        torch.manual_seed(0)
        logits = torch.randn(batch, VOCAB)
        logits[:, 50:] = float("-inf")  # top-k 50, as TRL samples: the zeros are what multinomial still walks
        probs = torch.softmax(logits[:, torch.randperm(VOCAB)], dim=-1)
        samplers = {"torch.multinomial": torch.multinomial, "inverse CDF": inverse_cdf_sample}
        cold = {}
        for name, sample in samplers.items():
            start = time.perf_counter_ns()
            sample(probs, 1)
            cold[name] = (time.perf_counter_ns() - start) / 1e3
        warm: dict[str, list[int]] = {name: [] for name in samplers}
        for _ in range(args.rounds):
            for name, sample in samplers.items():
                start = time.perf_counter_ns()
                sample(probs, 1)
                warm[name].append(time.perf_counter_ns() - start)
        for name in samplers:
            p50, p99 = percentiles(warm[name])
            rows.append([str(batch), name, f"{cold[name]:,.0f}", f"{p50:,.0f}", f"{p99:,.0f}"])
    header = (
        f"## One token from {VOCAB:,} entries (top-k 50), {torch.get_num_threads()} torch threads\n\n{machine()}; "
        f"{args.rounds} interleaved rounds"
    )
    report(header, ["batch", "sampler", "cold (us)", "warm p50 (us)", "warm p99 (us)"], rows, args.write)


if __name__ == "__main__":
    main()
