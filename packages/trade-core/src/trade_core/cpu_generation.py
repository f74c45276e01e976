"""Sampling from a language model on a few CPU cores at the speed of the model, not of its vocabulary.

A Qwen3 vocabulary has 151,936 entries, so every sampled token of a small model costs more in the sampler than
in the model: ``torch.multinomial`` over a batch of 16 such rows took 44-58 ms on this project's 2-core machine,
a tiny model's whole forward pass ~5 ms; in a GRPO step of 16 rollouts it was a quarter of the time. And torch's
two intra-op threads on two busy cores wait for each other: an element-wise op on one row took 7 ms with two
threads while anything else ran, 0.03 ms with one (docs/benchmarks.md, "Sampling on CPU"). Used by trade-eval's
``local`` policy and trade-train's trl-grpo trainer (torch is imported only when called).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def inverse_cdf_sample(probs: Any, num_samples: int = 1, replacement: bool = False, *, generator: Any = None,
                       out: Any = None, _multinomial: Any = None) -> Any:  # fmt: skip
    """``torch.multinomial`` for one draw per row, by inverse CDF: a cumulative sum and a binary search per row
    instead of an exponential variate per vocabulary entry. The same distribution: a token of probability 0 is
    never drawn. Other calls go to torch's own."""
    import torch

    if probs.device.type != "cpu" or probs.dim() != 2 or num_samples != 1 or out is not None:
        return _multinomial(probs, num_samples, replacement, generator=generator, out=out)
    cdf = probs.to(torch.float64).cumsum(-1)
    draw = torch.rand((probs.shape[0], 1), generator=generator, dtype=torch.float64) * cdf[:, -1:]
    return torch.searchsorted(cdf, draw, right=True).clamp_(max=probs.shape[1] - 1)


@contextlib.contextmanager
def fast_cpu_sampling(threads: int | None = 1) -> Iterator[None]:
    """Within the block, one-draw ``torch.multinomial`` samples by inverse CDF and torch runs ``threads`` intra-op
    threads (None: unchanged); both are restored after."""
    import functools

    import torch

    original, before = torch.multinomial, torch.get_num_threads()
    torch.multinomial = functools.partial(inverse_cdf_sample, _multinomial=original)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.multinomial = original
        torch.set_num_threads(before)
