"""A short fine-tune of a pretrained causal LM on tool-call demonstrations, laid out by the model's own template.

A pretrained model already reads and copies from its context; what it lacks is our tools' call format. The
fine-tune teaches the format on days played through the Episode, learning the replies only: each demonstration
is rendered turn by turn with the model's chat template, as TRL builds a rollout (the prompt, a generated reply
up to its end-of-turn token, the template's tool-result text, the next generation prompt), and the loss falls on
the replies' tokens alone, with the output projection computed only at those positions, and the opening the
step's days share (the system prompt and tool schemas) read once (:mod:`trade_train.logprobs`). Only the top
``train_layers`` decoder layers learn: the rest of the network, embeddings included, keeps what pretraining gave
it (and no gradient flows below the first trained layer, which makes a step cheap).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trade_core.cpu_generation import autocast
from trade_core.errors import TradeError
from trade_train.logprobs import written_logprobs
from trade_train.tiny.scripted import Demonstration


@dataclass(frozen=True)
class TuneReport:
    """What a fine-tune did, for the stage's results."""

    steps: int
    demonstrations: int
    first_loss: float
    last_loss: float
    seconds: float


def render_turns(tokenizer: Any, demo: Demonstration) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids of a whole day and the positions the model wrote (each reply through its end-of-turn token).

    The pieces are tokenized apart and joined, as a rollout's ids are: the prompt up to a generation prompt, the
    reply, then what the template adds after the reply up to the next generation prompt.
    """
    messages, ids, written = demo.messages, [], []
    rendered = ""
    end = tokenizer.eos_token
    for at, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(
            messages[:at], tools=demo.tools, add_generation_prompt=True, tokenize=False
        )
        whole = tokenizer.apply_chat_template(messages[: at + 1], tools=demo.tools, tokenize=False)
        if not prompt.startswith(rendered) or not whole.startswith(prompt) or end not in whole[len(prompt) :]:
            raise TradeError(
                "the model's chat template does not render a conversation turn by turn",
                hint="use a template whose rendering of a conversation starts with that of each earlier part",
            )
        reply = whole[len(prompt) : whole.index(end, len(prompt)) + len(end)]
        context = tokenizer.encode(prompt[len(rendered) :], add_special_tokens=False)
        answer = tokenizer.encode(reply, add_special_tokens=False)
        ids += context
        written += range(len(ids), len(ids) + len(answer))
        ids += answer
        rendered = prompt + reply
    if not written:
        raise TradeError("a demonstration has no assistant reply")
    return torch.tensor(ids), torch.tensor(written)


def freeze_below(model: Any, train_layers: int) -> int:
    """Leave only the top ``train_layers`` decoder layers (and the final norm) trainable; 0 trains everything.
    Returns the number of trainable parameters."""
    if train_layers:
        layers = model.model.layers
        if train_layers > len(layers):
            raise TradeError(f"--train-layers {train_layers}: the model has {len(layers)} layers")
        model.requires_grad_(False)
        for layer in layers[len(layers) - train_layers :]:
            layer.requires_grad_(True)
        model.model.norm.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def tune(
    model_dir: Path,
    demos: Sequence[Demonstration],
    steps: int,
    *,
    batch: int = 8,
    learning_rate: float = 1e-4,
    train_layers: int = 8,
    seed: int = 0,
    precision: str = "float32",
    progress: Callable[[int, float], None] | None = None,
) -> TuneReport:
    """Fine-tune the model in ``model_dir`` in place: ``steps`` AdamW steps of ``batch`` demonstrations each
    (cosine schedule after a short warm-up), on CPU with float32 weights and ``precision`` products, seeded.
    ``progress(step, loss)`` after each step."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    if steps < 1 or batch < 1 or not demos:
        raise TradeError(f"a fine-tune needs steps and demonstrations, got {steps} steps of {batch}, {len(demos)}")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    examples = [render_turns(tokenizer, demo) for demo in demos]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    freeze_below(model, train_layers)
    model.train()
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=learning_rate, weight_decay=0.0)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))
    )
    order = np.random.default_rng(seed).permutation(np.resize(np.arange(len(examples)), steps * batch))
    losses = []
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        chosen = [examples[int(index)] for index in order[step * batch : (step + 1) * batch]]
        with autocast(precision):
            logprobs = written_logprobs(model, [ids.tolist() for ids, _ in chosen], [w.tolist() for _, w in chosen])
        loss = -sum(row.mean() for row in logprobs) / len(chosen)  # each day's mean over its written tokens
        loss.backward()
        total = loss.item()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(total)
        if progress is not None:
            progress(step, total)
    model.eval()
    model.save_pretrained(model_dir)
    for weights in model_dir.glob("*.safetensors"):
        weights.chmod(0o644)
    return TuneReport(
        steps=steps,
        demonstrations=len(examples),
        first_loss=losses[0],
        last_loss=float(np.mean(losses[-5:])),
        seconds=time.perf_counter() - started,
    )
