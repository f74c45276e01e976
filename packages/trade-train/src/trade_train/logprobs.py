"""The log-probabilities of the tokens a model wrote, for a batch of sequences that open alike, read cheaply.

Every day of a run opens with the same system prompt and tool schemas, and every rollout of a GRPO group with the
same first prompt: most of each sequence. :func:`written_logprobs` reads the batch's common opening once, repeats
its keys and values for the rows (the gradient flows back through them, so every number and gradient is that of
reading each row whole, up to the order of float sums), reads each row's rest padded on the right (unmasked:
causal attention keeps a row's tokens from the padding after them), and projects
onto the vocabulary only at the positions before a written token (the output projection over the whole sequence
was most of a step on CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def common_opening(sequences: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every sequence shares."""
    first = sequences[0]
    shared = min(len(s) for s in sequences)
    for other in sequences[1:]:
        shared = next((i for i in range(shared) if other[i] != first[i]), shared)
    return shared


def written_logprobs(
    model: Any, sequences: Sequence[Sequence[int]], written: Sequence[Sequence[int]], temperature: float = 1.0
) -> list[Any]:
    """Per row, the log-probability (logits over ``temperature``) of each token at the positions in ``written``,
    given the tokens before it. Positions must be past the first token."""
    import torch
    from torch.nn.functional import log_softmax

    shared = min(common_opening(sequences), *(min(w) for w in written if len(w))) - 1
    device = model.device
    cache = None
    if shared > 0:
        opening = torch.tensor([list(sequences[0][:shared])], device=device)
        cache = model.model(input_ids=opening, use_cache=True).past_key_values
        cache.batch_repeat_interleave(len(sequences))
    width = max(len(s) for s in sequences) - shared
    ids = torch.tensor([list(s[shared:]) + [0] * (width + shared - len(s)) for s in sequences], device=device)
    # no padding mask: causal attention keeps each row's tokens from the padding after them, and the padding's
    # own outputs are never read (a mask cost a third more on CPU: docs/benchmarks.md, "A pretrained base")
    hidden = model.model(input_ids=ids, past_key_values=cache).last_hidden_state
    head = model.get_output_embeddings().weight
    rows = []
    for at, (sequence, positions) in enumerate(zip(sequences, written, strict=True)):
        where = torch.tensor(list(positions), dtype=torch.long, device=device)
        logits = hidden[at, where - shared - 1] @ head.T / temperature
        targets = torch.tensor(list(sequence), device=device)[where]
        rows.append(log_softmax(logits.float(), -1).gather(1, targets[:, None]).squeeze(1))
    return rows
