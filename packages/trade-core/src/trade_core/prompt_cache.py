"""The keys and values of prompts a model has read, so a prompt that starts like one of them reads only the rest.

A trading day's prompts repeat themselves: every day of a run opens with the same system prompt and tool schemas
(about 1,100 of a pretrained base's first 1,360 tokens), every sample of a task with the same first prompt, and
each turn's prompt is the previous one plus a reply and its tool texts. Reading a prompt is most of a small model's
time on CPU (docs/benchmarks.md, "Prompt cache"), so :class:`PromptCache` keeps what recent prompts left in the
attention layers and reads a new prompt from the longest prefix it shares with one of them, as vLLM's prefix
caching does on a server. The numbers it gives are the model's up to the order of float sums (a prompt read in
two pieces sums its attention in another order than one read whole): the last bits can differ, as in a batch.

torch and transformers are imported when a cache is made; a model whose layers are not all attention (sliding
windows, linear attention) keeps no such cache and must not use one.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

BUDGET_MB = 4096
"""Memory the kept keys and values may take by default: about 90,000 tokens of SmolLM2-135M in float32 (46 KB a
token), 50 of its trading-day prompts, so a batch of 32 rows finds its prompts still kept when it joins them."""


class PromptCache:
    """Recent prompts' keys and values, least recently used dropped first once they take more than ``budget_mb``
    (0 keeps none: every prompt is read whole)."""

    def __init__(self, model: Any, budget_mb: int = BUDGET_MB) -> None:
        self.model = model
        self.budget = budget_mb * 2**20
        self.kept: OrderedDict[tuple[int, ...], tuple[Any, list[tuple[Any, Any]]]] = OrderedDict()
        self.size = 0
        self.read_tokens = 0
        """Tokens the model read since the cache was made (the prefixes it gave are not counted)."""
        self.given_tokens = 0
        """Tokens whose keys and values came from the cache instead."""

    def layers(self, ids: list[int]) -> list[tuple[Any, Any]]:
        """Per attention layer, the keys and values of ``ids`` (each ``[1, kv heads, len(ids), head dim]``), read
        from the longest kept prefix on; kept in turn. Call it under ``torch.inference_mode()`` or ``no_grad()``."""
        import torch
        from transformers import DynamicCache

        tokens = torch.tensor(ids)
        key, shared, start = tuple(ids), 0, None
        if key in self.kept:
            self.kept.move_to_end(key)
            self.given_tokens += len(ids)
            return self.kept[key][1]
        for name, (kept, layers) in self.kept.items():
            width = min(len(kept), len(tokens))
            differ = (kept[:width] != tokens[:width]).nonzero()
            common = int(differ[0, 0]) if len(differ) else width
            if common > shared:
                shared, start = common, (name, layers)
        cache = DynamicCache(config=self.model.config)
        if start is not None:
            self.kept.move_to_end(start[0])
            cache = DynamicCache([(k[:, :, :shared], v[:, :, :shared]) for k, v in start[1]])
        if shared < len(ids):
            rest = torch.tensor([ids[shared:]], device=self.model.device)
            self.model.base_model(input_ids=rest, past_key_values=cache, use_cache=True)
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        self.read_tokens += len(ids) - shared
        self.given_tokens += shared
        self._keep(key, tokens, layers)
        return layers

    def joined(
        self, prompts: list[list[int]], pad: int, room: int = 256, share_opening: bool = True
    ) -> tuple[Any, Any, Any]:
        """``generate``'s ``input_ids``, ``attention_mask`` and ``past_key_values`` for a batch of ``prompts``:
        the cache holds every prompt but its last token, with ``room`` tokens to decode into before it must grow.

        Each prompt is read alone (causal attention needs no mask: under a padding mask, CPU attention over a batch
        of prompts cost 2.5 times as much) and its keys and values are copied once, into the buffer the decode
        writes on in. Under :data:`~trade_core.cpu_generation.GQA_ATTENTION`, the opening all the prompts share (a
        day's system prompt and tool schemas, a task's first prompt for its samples) is held once, ahead of the
        padding, and a decode step reads it once for every row instead of once a row (docs/benchmarks.md,
        "Prompt cache"); other attention, or ``share_opening=False``, gets each row whole, left-padded."""
        import torch
        from transformers import DynamicCache

        from trade_core.cpu_generation import GQA_ATTENTION

        rows = [self.layers(prompt[:-1]) for prompt in prompts]
        shared = 0
        ours = getattr(self.model.config, "_attn_implementation", None) == GQA_ATTENTION
        if share_opening and ours and len(prompts) > 1:
            shared = _common_length([prompt[:-1] for prompt in prompts])
        width = max(len(prompt) for prompt in prompts) - 1 - shared  # of each row's own part
        ids = [prompt[:shared] + [pad] * (width + shared + 1 - len(prompt)) + prompt[shared:] for prompt in prompts]
        mask = [[1] * shared + [0] * (width + shared + 1 - len(p)) + [1] * (len(p) - shared) for p in prompts]
        cache = DynamicCache([(keys[:, :, :0], values[:, :, :0]) for keys, values in rows[0]])
        for number, layer in enumerate(cache.layers):
            layer.__class__ = _roomy_layer()
            held = [row[number] for row in rows]
            buffers = []
            for part in range(2):  # keys, then values
                first = held[0][part]
                buffer = first.new_empty((len(rows), first.shape[1], width + max(room, 1), first.shape[3]))
                for at, pair in enumerate(held):
                    own = pair[part][0, :, shared:]
                    buffer[at, :, : width - own.shape[1]] = 0  # masked, but 0 times garbage could still be NaN
                    buffer[at, :, width - own.shape[1] : width] = own
                buffers.append(buffer)
            layer.room = tuple(buffers)
            layer.keys, layer.values = buffers[0][:, :, :width], buffers[1][:, :, :width]
            if shared:
                layer.prefix = (held[0][0][:, :, :shared], held[0][1][:, :, :shared])
        device = self.model.device
        return torch.tensor(ids, device=device), torch.tensor(mask, device=device), cache

    def _keep(self, key: tuple[int, ...], tokens: Any, layers: list[tuple[Any, Any]]) -> None:
        if not self.budget:
            return
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        self.kept[key] = (tokens, layers)
        self.size += size
        while self.size > self.budget and len(self.kept) > 1:
            _, (_, dropped) = self.kept.popitem(last=False)
            self.size -= sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in dropped)


def _roomy_layer() -> type:
    """transformers' ``DynamicLayer`` whose keys and values live in a buffer with room to grow: a decode step
    writes its token into the room instead of copying the whole cache with ``torch.cat`` (53% of a SmolLM2 decode
    step at 8 rows and 1,400 tokens: docs/benchmarks.md, "Prompt cache"). Made once, on first use (transformers is
    imported late)."""
    global _ROOMY
    if _ROOMY is None:
        from transformers.cache_utils import DynamicLayer

        class RoomyLayer(DynamicLayer):
            prefix: tuple[Any, Any] | None = None
            """Keys and values ``[1, kv heads, tokens, head dim]`` every row shares, ahead of its own."""

            def get_seq_length(self) -> int:
                return super().get_seq_length() + (0 if self.prefix is None else self.prefix[0].shape[-2])

            def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                held = self.keys.shape[-2] if self.keys.numel() else 0
                total = held + key_states.shape[-2]
                room = getattr(self, "room", None)
                if room is None or room[0].shape[-2] < total or room[0].data_ptr() != self.keys.data_ptr():
                    shape = (*key_states.shape[:2], max(2 * total, total + 256), key_states.shape[-1])
                    room = (key_states.new_empty(shape), value_states.new_empty(shape))
                    if held:  # what was held (the prompt, or a cache another method replaced) moves in once
                        room[0][..., :held, :] = self.keys
                        room[1][..., :held, :] = self.values
                    self.room = room
                room[0][..., held:total, :] = key_states
                room[1][..., held:total, :] = value_states
                self.keys, self.values = room[0][..., :total, :], room[1][..., :total, :]
                if self.prefix is not None:
                    self.keys.shared_prefix = self.prefix  # the attention reads it (cpu_generation.grouped_attention)
                return self.keys, self.values

        _ROOMY = RoomyLayer
    return _ROOMY


_ROOMY: type | None = None


def _common_length(prompts: list[list[int]]) -> int:
    """Tokens every one of ``prompts`` starts with."""
    shortest = min(prompts, key=len)
    for at, token in enumerate(shortest):
        if any(prompt[at] != token for prompt in prompts):
            return at
    return len(shortest)
