"""Sampling from a language model on a few CPU cores at the speed of the model, not of its vocabulary.

A Qwen3 vocabulary has 151,936 entries, so every sampled token of a small model costs more in the sampler than
in the model: ``torch.multinomial`` over a batch of 16 such rows took 44-58 ms on this project's 2-core machine,
a tiny model's whole forward pass ~5 ms; in a GRPO step of 16 rollouts it was a quarter of the time. And torch's
two intra-op threads on two busy cores wait for each other: an element-wise op on one row took 7 ms with two
threads while anything else ran, 0.03 ms with one (docs/benchmarks.md, "Sampling on CPU"). Used by trade-eval's
``local`` policy and trade-train's trl-grpo trainer (torch is imported only when called). Given one generator per
row, the sampler draws row i from the i-th on any device: a batch of requests samples as each would alone, each
from its own seed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Literal, get_args


def inverse_cdf_sample(
    probs: Any,
    num_samples: int = 1,
    replacement: bool = False,
    *,
    generator: Any = None,
    out: Any = None,
    _multinomial: Any = None,
) -> Any:
    """``torch.multinomial`` for one draw per row, by inverse CDF: a cumulative sum and a binary search per row
    instead of an exponential variate per vocabulary entry. The same distribution: a token of probability 0 is
    never drawn. ``generator`` may be a sequence of CPU generators, one per row, each drawing its row's uniform
    (on any device). Other calls go to torch's own."""
    import torch

    per_row = isinstance(generator, Sequence)
    if (probs.device.type != "cpu" and not per_row) or probs.dim() != 2 or num_samples != 1 or out is not None:
        return _multinomial(probs, num_samples, replacement, generator=generator, out=out)
    cdf = probs.to(torch.float64).cumsum(-1)
    if per_row:
        if len(generator) != probs.shape[0]:
            raise ValueError(f"{len(generator)} generators for {probs.shape[0]} rows")
        uniform = torch.cat([torch.rand((1, 1), generator=row, dtype=torch.float64) for row in generator])
    else:
        uniform = torch.rand((probs.shape[0], 1), generator=generator, dtype=torch.float64)
    draw = uniform.to(cdf.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, draw, right=True).clamp_(max=probs.shape[1] - 1)


@contextlib.contextmanager
def fast_cpu_sampling(threads: int | None = 1, generators: Sequence[Any] | None = None) -> Iterator[None]:
    """Within the block, one-draw ``torch.multinomial`` samples by inverse CDF (row i from ``generators[i]`` when
    given, on any device) and torch runs ``threads`` intra-op threads (None: unchanged); both are restored after."""
    import functools

    import torch

    original, before = torch.multinomial, torch.get_num_threads()
    rows = {} if generators is None else {"generator": generators}
    torch.multinomial = functools.partial(inverse_cdf_sample, _multinomial=original, **rows)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.multinomial = original
        torch.set_num_threads(before)


GQA_ATTENTION = "trade_sdpa_gqa"
"""transformers' ``sdpa`` attention that keeps grouped-query keys and values grouped under a mask too."""


def grouped_attention(model: Any) -> Any:
    """``model`` (a transformers model) with :data:`GQA_ATTENTION`: transformers' ``sdpa`` copies a grouped-query
    model's keys and values once per query head (``repeat_kv``) whenever there is a mask (a batch of prompts of other
    lengths, a cache read on from) and only skips it without one; torch's attention takes the groups as they are
    (``enable_gqa``). A decode step of SmolLM2-135M (9 query heads on 3 key heads) over 8 rows of 1,700 tokens spent
    7.6 ms a layer in attention that way and 2.4 ms this way (docs/benchmarks.md, "Prompt cache"). Registered with
    transformers on first use; the numbers are the same attention's."""
    import torch
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    def attend(
        module: Any,
        query: Any,
        key: Any,
        value: Any,
        attention_mask: Any,
        dropout: float = 0.0,
        scaling: float | None = None,
        is_causal: bool | None = None,
        **kwargs: Any,
    ) -> tuple[Any, None]:
        shared = getattr(key, "shared_prefix", None)
        if shared is not None:
            return _with_shared_prefix(query, key, value, shared, attention_mask, scaling), None
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        out = torch.nn.functional.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attention_mask,
            dropout_p=dropout,
            scale=scaling,
            is_causal=bool(query.shape[2] > 1 and attention_mask is None and causal),
            enable_gqa=key.shape[1] != query.shape[1],
        )
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(GQA_ATTENTION, attend)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GQA_ATTENTION, sdpa_mask)
    model.set_attn_implementation(GQA_ATTENTION)
    return model


def _with_shared_prefix(query: Any, key: Any, value: Any, shared: tuple[Any, Any], mask: Any, scale: Any) -> Any:
    """Attention of a batch of rows over keys every row shares (``shared``, ``[1, kv heads, P, dim]``) and then
    each row's own (``key``, ``[rows, kv heads, S, dim]``, under ``mask[..., P:]``), as the softmax over both
    (cascade attention): the shared keys are read once for the batch, as one product of every row's queries.
    ``[rows, tokens, heads, dim]``, as the attention interface returns it."""
    import math

    import torch

    rows, heads, length, dim = query.shape
    groups = heads // key.shape[1]
    scale = scale if scale is not None else 1 / math.sqrt(dim)
    grouped = query.reshape(rows, key.shape[1], groups * length, dim)  # [rows, kv heads, groups x tokens, dim]
    together = grouped.transpose(0, 1).reshape(1, key.shape[1], rows * groups * length, dim)
    first = (together @ shared[0].transpose(-1, -2)) * scale  # [1, kv heads, rows x groups x tokens, P]
    first = first.reshape(key.shape[1], rows, groups * length, -1).transpose(0, 1)
    own = (grouped @ key.transpose(-1, -2)) * scale  # [rows, kv heads, groups x tokens, S]
    if mask is not None:
        part = mask[..., shared[0].shape[-2] :]  # [rows, 1, tokens, S]
        part = part.unsqueeze(2).expand(-1, -1, groups, -1, -1).reshape(rows, 1, groups * length, -1)
        own = own.masked_fill(~part, -math.inf) if part.dtype == torch.bool else own + part
    top = torch.maximum(first.amax(-1, keepdim=True), own.amax(-1, keepdim=True))
    first, own = (first - top).exp(), (own - top).exp()
    total = first.sum(-1, keepdim=True) + own.sum(-1, keepdim=True)
    weighted = first.transpose(0, 1).reshape(1, key.shape[1], rows * groups * length, -1) @ shared[1]
    weighted = weighted.reshape(key.shape[1], rows, groups * length, dim).transpose(0, 1) + own @ value
    out = (weighted / total).reshape(rows, heads, length, dim)
    return out.transpose(1, 2).contiguous()


Precision = Literal["auto", "float32", "bfloat16"]
"""How a model computes on CPU: ``auto`` is bfloat16 where the CPU multiplies it in hardware, else float32."""
PRECISIONS: tuple[str, ...] = get_args(Precision)


def cpu_precision(choice: str = "auto") -> str:
    """``float32`` or ``bfloat16`` for ``choice``. ``auto`` takes bfloat16 where oneDNN has bf16 kernels for this
    CPU (AVX512-BF16 and AMX on x86, BF16 on Arm): there SmolLM2-135M read prompts 2.8x and trained 4x as fast
    as in float32; on a CPU without them bf16 is emulated and slower (docs/benchmarks.md, "bfloat16 where the CPU
    has it")."""
    if choice not in PRECISIONS:
        raise ValueError(f"precision {choice!r} is not one of {', '.join(PRECISIONS)}")
    if choice != "auto":
        return choice
    import torch

    native = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "bfloat16" if native else "float32"


def autocast(precision: str) -> contextlib.AbstractContextManager[Any]:
    """Within the block, a float32 model's matrix products run in ``precision`` (its weights, their gradients and
    the optimizer's state stay float32, so small updates are not rounded away)."""
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16")
