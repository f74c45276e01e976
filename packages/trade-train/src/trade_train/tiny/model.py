"""A tiny Qwen3 model folder: the real architecture, small, its weights from a seed, with the real tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from trade_core.errors import TradeError
from trade_train.tiny.tokenizer import BOS_ID, EOS_ID, PAD_ID, build_tokenizer

FAMILIES = ("qwen3",)
VOCAB_SIZE = 151936  # the embedding rows of every Qwen3 model: the 151,669 tokens padded for kernels
# vLLM's CPU attention supports head sizes 32 and 64 only; the tiny model keeps Qwen3's 2:1 grouped-query layout.
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 32
# Saved as bf16: Qwen3 ships bf16 and vLLM-CPU serves bf16, so what tests exercise is what is saved (and the
# folder is half the fp32 size); fine-tuning keeps fp32 weights and rounds once when saving.
SAVE_DTYPE = torch.bfloat16


def build_tiny_model(out: Path, family: str = "qwen3", *, seed: int = 0, layers: int = 2, hidden: int = 64) -> Path:
    """Write a randomly initialised tiny Qwen3 (seeded, bf16 safetensors) with the real tokenizer to ``out``."""
    if family not in FAMILIES:
        raise TradeError(f"unknown model family {family!r}", hint=f"choose one of: {', '.join(FAMILIES)}")
    if layers < 1 or hidden < 1:
        raise TradeError(f"bad model size: {layers} layers, hidden {hidden}", hint="both must be positive")
    config = Qwen3Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        tie_word_embeddings=True,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    save_model(model, out)
    build_tokenizer(out)
    return out


def save_model(model: Qwen3ForCausalLM, out: Path) -> None:
    """Save as bf16 safetensors with Qwen3's sampling defaults (clients ask for greedy explicitly)."""
    model.generation_config = GenerationConfig(
        bos_token_id=BOS_ID,
        eos_token_id=[EOS_ID, BOS_ID],
        pad_token_id=PAD_ID,
        do_sample=True,
        temperature=0.6,
        top_k=20,
        top_p=0.95,
    )
    model.to(SAVE_DTYPE).save_pretrained(out)
    for weights in out.glob("*.safetensors"):  # written owner-only; servers and Ray workers may run as others
        weights.chmod(0o644)
