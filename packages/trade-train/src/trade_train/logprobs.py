"""The log-probabilities of the tokens a model wrote, for a batch of sequences that open alike, read cheaply.

Every day of a run opens with the same system prompt and tool schemas, and every rollout of a GRPO group with the
same first prompt, often the same first reply and tool text too: most of each sequence. :func:`written_logprobs`
reads the batch's common opening once, repeats its keys and values for the rows (the gradient flows back through
them, so every number and gradient is that of reading each row whole, up to the order of float sums), scores the
written tokens inside the opening once for all rows, reads each row's rest padded on the right (unmasked: causal
attention keeps a row's tokens from the padding after them), and projects onto the vocabulary only at the positions
before a written token (the output projection over the whole sequence was most of a step on CPU).
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
    given the tokens before it. Positions must be past the first token, in ascending order."""
    import torch
    from torch.nn.functional import log_softmax

    shared = min(common_opening(sequences), *(len(s) - 1 for s in sequences))  # every row keeps a token to read
    device = model.device
    head = model.get_output_embeddings().weight
    opened, row_of, cache = None, {}, None  # the opening's log-probabilities before the written tokens it reaches
    if shared > 0:
        opening = torch.tensor([list(sequences[0][:shared])], device=device)
        read = model.model(input_ids=opening, use_cache=True)
        before = sorted({p - 1 for w in written for p in w if p <= shared})
        if before:
            row_of = {p: row for row, p in enumerate(before)}
            logits = read.last_hidden_state[0, torch.tensor(before, device=device)] @ head.T / temperature
            opened = log_softmax(logits.float(), -1)
        cache = read.past_key_values
        cache.batch_repeat_interleave(len(sequences))
    width = max(len(s) for s in sequences) - shared
    ids = torch.tensor([list(s[shared:]) + [0] * (width + shared - len(s)) for s in sequences], device=device)
    # no padding mask: causal attention keeps each row's tokens from the padding after them, and the padding's
    # own outputs are never read (a mask cost a third more on CPU: docs/benchmarks.md, "A pretrained base")
    hidden = model.model(input_ids=ids, past_key_values=cache).last_hidden_state
    rows = []
    for at, (sequence, positions) in enumerate(zip(sequences, written, strict=True)):
        inside = [p for p in positions if p <= shared]
        after = torch.tensor([p for p in positions if p > shared], dtype=torch.long, device=device)
        logits = hidden[at, after - shared - 1] @ head.T / temperature
        targets = torch.tensor(list(sequence), device=device)[after]
        rest = log_softmax(logits.float(), -1).gather(1, targets[:, None]).squeeze(1)
        if inside:
            rest = torch.cat([opened[[row_of[p - 1] for p in inside], [sequence[p] for p in inside]], rest])
        rows.append(rest)
    return rows
