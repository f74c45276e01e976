"""A short seeded CPU fine-tune that teaches the tiny model to answer with well-formed tool calls."""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase, Qwen3ForCausalLM

from trade_core.errors import TradeError
from trade_data.synth import write_synthetic_market
from trade_tools.toolcalls import HERMES, parse_reply
from trade_train.tiny.model import VOCAB_SIZE, save_model
from trade_train.tiny.scripted import Demonstration, tool_call_demonstrations
from trade_train.tiny.tokenizer import FIRST_ADDED_ID, QWEN3_ADDED_TOKENS


@dataclass(frozen=True)
class TuneReport:
    """What a fine-tune did, for the command's summary line."""

    steps: int
    demonstrations: int
    first_loss: float
    last_loss: float
    seconds: float


def tune_tool_calls(
    model_dir: Path, data: Path | None = None, steps: int = 600, *, seed: int = 0, demonstrations: int = 48
) -> TuneReport:
    """Fine-tune the model in ``model_dir`` in place on the scripted policy's demonstrations
    (:mod:`trade_train.tiny.scripted`) on ``data``; without it, on a small seeded synthetic market."""
    started = time.perf_counter()
    if steps < 1:
        raise TradeError(f"--sft-steps must be positive, got {steps}")
    with tempfile.TemporaryDirectory(prefix="trade-tiny-") as scratch:
        if data is None:
            data = write_synthetic_market(
                Path(scratch) / "market", symbols=60, start="2023-01-01", end="2024-12-31", seed=seed
            )
        demos = tool_call_demonstrations(data, demonstrations, seed=seed)
    return tune_on(model_dir, demos, steps, seed=seed, started=started)


def tune_on(
    model_dir: Path,
    demos: Sequence[Demonstration],
    steps: int,
    *,
    learning_rate: float = 1e-2,
    seed: int = 0,
    started: float | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> TuneReport:
    """Fine-tune the model in ``model_dir`` in place on ``demos``, so greedy decoding emits well-formed
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>`` (values may still be wrong).

    The reply is the call itself, with thinking on or off: a think block the model has to open and close
    itself was often left unclosed by a model this small. Runs on CPU in fp32 with a fixed seed (the same
    machine gives the same weights), one demonstration per step, learning only the assistant's tokens in the
    layout verl's agent loop produces. ``progress(step, loss)`` is called after each step.
    """
    started = time.perf_counter() if started is None else started
    if steps < 1 or not demos:
        raise TradeError(f"a fine-tune needs steps and demonstrations, got {steps} steps, {len(demos)} demos")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    examples = [_token_example(tokenizer, demo) for demo in demos]
    # The softmax runs over the tokens the demonstrations contain (under a thousand), not all 151,936 rows: the
    # full projection was half of every step. Tokens never seen keep their tiny random embeddings, far below the
    # trained ones, so greedy decoding over the whole vocabulary still picks what was learned.
    added = torch.arange(FIRST_ADDED_ID, FIRST_ADDED_ID + len(QWEN3_ADDED_TOKENS))
    vocab = torch.unique(torch.cat([ids for ids, _ in examples] + [added]))
    position = torch.full((VOCAB_SIZE,), -1, dtype=torch.long)
    position[vocab] = torch.arange(len(vocab))
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    # A high rate with a short second-moment memory: the format is learned from scratch in a few hundred steps
    # (with beta2=0.999 about half of the later calls stayed malformed on some seeds).
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.0)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))
    )
    order = np.random.default_rng(seed).permutation(np.resize(np.arange(len(examples)), steps))
    losses = []
    for step in range(steps):
        ids, targets = examples[int(order[step])]
        hidden = model.model(input_ids=ids[None]).last_hidden_state[0]
        logits = hidden[targets - 1] @ model.lm_head.weight[vocab].T  # only where the assistant speaks
        loss = torch.nn.functional.cross_entropy(logits, position[ids[targets]])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if progress is not None:
            progress(step, losses[-1])
    model.eval()
    save_model(model, model_dir)
    return TuneReport(
        steps=steps,
        demonstrations=len(examples),
        first_loss=losses[0],
        last_loss=float(np.mean(losses[-10:])),
        seconds=time.perf_counter() - started,
    )


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of the first hermes call in ``text`` as a server's parser reads it (see
    :mod:`trade_tools.toolcalls`), or None when there is none or its arguments are not a JSON object."""
    calls = parse_reply(text, HERMES).calls
    arguments = json.loads(calls[0][1]) if calls else None
    return (calls[0][0], arguments) if isinstance(arguments, dict) else None


def _token_example(tokenizer: PreTrainedTokenizerBase, demo: Demonstration) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids of a whole day and the positions the assistant produced, laid out as verl's agent loop does.

    Each reply is ``<tool_call>...</tool_call><|im_end|>``, after the generation prompt (which pre-fills an empty
    think block when thinking is off). The tool result follows as Qwen3 renders it (verl inserts the newline
    after a generated ``<|im_end|>``), then the generation prompt for the next reply.
    """
    head = tokenizer.apply_chat_template(
        demo.messages[:2], tools=demo.tools, add_generation_prompt=True, enable_thinking=demo.thinking, tokenize=False
    )
    generation_prompt = "<|im_start|>assistant\n" + ("" if demo.thinking else "<think>\n\n</think>\n\n")
    pieces: list[tuple[str, bool]] = [(head, False)]
    for reply, result in zip(demo.messages[2::2], demo.messages[3::2], strict=True):
        function = reply["tool_calls"][0]["function"]
        call = f'<tool_call>\n{{"name": "{function["name"]}", "arguments": {function["arguments"]}}}\n</tool_call>'
        pieces.append((call + "<|im_end|>", True))
        response = f"\n<|im_start|>user\n<tool_response>\n{result['content']}\n</tool_response><|im_end|>\n"
        pieces.append((response + generation_prompt, False))
    ids: list[int] = []
    targets: list[int] = []
    for text, learned in pieces[:-1]:  # nothing follows the last reply
        piece = tokenizer.encode(text, add_special_tokens=False)
        if learned:
            targets.extend(range(len(ids), len(ids) + len(piece)))
        ids.extend(piece)
    return torch.tensor(ids), torch.tensor(targets)
