"""``local``: a Hugging Face causal LM loaded in-process with transformers plays the day, with no server.

Each reply answers the very request the ``llm`` policy would send a server, the way vLLM serves Qwen models:
the conversation and the Episode's tool schemas rendered by the model's own chat template (thinking as the
template defaults), sampled with the run's temperature, top_p and max_tokens from a seed per day and reply
(greedy at temperature 0, so a rerun writes the same text), the reasoning and tool calls read from the text by
:mod:`trade_tools.toolcalls` in the family's format, and the answer played as the ``llm`` policy plays a
server's. ``--model`` is the model folder; ``--set device=cuda:0`` picks the device (default: the first GPU if
any, else CPU). A process loads a model once; generation runs in a worker thread, one request at a time, so
the event loop keeps the other episodes in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from trade_core.cpu_generation import fast_cpu_sampling
from trade_core.errors import TradeError
from trade_eval.policies.llm import chat_request, play_reply
from trade_eval.policy import DayUsage, Policy, RunSettings
from trade_eval.serving import model_family
from trade_tools.day import TradingDay
from trade_tools.toolcalls import call_format, parse_reply

log = structlog.get_logger("trade.eval.local")

MAX_TOKENS = 2048
"""Completion tokens per reply without ``--max-tokens`` (a server's limit is the context left)."""
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
"""PyPI's Linux torch is the CUDA build, gigabytes of CUDA libraries."""


class LocalPolicy(Policy):
    name = "local"
    description = "a Hugging Face model folder run in-process with transformers (CPU or one GPU), no server"

    def check(self, settings: RunSettings) -> None:
        """Refuse a run whose model cannot be loaded before any day starts (and keep it loaded for the days)."""
        _loaded(settings)

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        model = _loaded(settings)
        usage = DayUsage()
        tools = day.episode.tool_schemas()
        while day.is_open:
            usage.requests += 1
            answer = await asyncio.to_thread(
                model.complete, chat_request(day, settings, tools), str(day.episode.task.date)
            )
            play_reply(day, answer, usage)
        return usage


def _loaded(settings: RunSettings) -> LocalModel:
    if not settings.model:
        raise TradeError("policy 'local' needs a model folder", hint="pass --model DIR (a Hugging Face model folder)")
    folder = Path(settings.model).expanduser().resolve()
    return _load(folder, str(settings.options.get("device", "")))


@functools.cache
def _load(folder: Path, device: str) -> LocalModel:
    """One model per folder and device in a process: loading is seconds, a day's reply much less."""
    family = model_family(folder)  # before the imports: a wrong folder is the likelier mistake
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        command = "pip install 'trade-eval[local]'"
        raise TradeError(
            f"policy 'local' needs {' and '.join(missing)}",
            hint=command if "torch" not in missing else f"{CPU_TORCH} && {command}",  # the extra keeps a torch
        )
    return LocalModel(folder, call_format(family), device)


class LocalModel:
    """A model folder loaded for generation, answering chat-completion requests as a vLLM server would."""

    def __init__(self, folder: Path, fmt: str, device: str = "") -> None:
        """``device``: a torch device; '' picks the first GPU if there is one, else the CPU (in fp32)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.format = fmt
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        dtype = torch.float32 if self.device.type == "cpu" else "auto"  # bf16 matmuls are slow on most CPUs
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(self.device).eval()
        self.stops = set(self.model.generation_config.eos_token_id or [])
        self._lock = threading.Lock()
        log.info("local.loaded", model=str(folder), device=str(self.device), format=fmt)

    def complete(self, request: dict[str, Any], day: str = "") -> dict[str, Any]:
        """The chat.completion answer to ``request`` (the ``llm`` policy's), reasoning and calls parsed out."""
        import torch

        inputs = self.tokenizer.apply_chat_template(
            request["messages"], tools=request["tools"], add_generation_prompt=True, return_tensors="pt",
            return_dict=True,
        ).to(self.device)  # fmt: skip
        prompt = inputs["input_ids"].shape[1]
        with self._lock, torch.inference_mode():
            started = time.perf_counter()  # the generation's own time, not the wait for the lock
            torch.manual_seed(request["seed"])  # the global generator: one generation at a time holds it
            with fast_cpu_sampling(threads=None) if self.device.type == "cpu" else contextlib.nullcontext():
                output = self.model.generate(**inputs, **self._sampling(request))
            seconds = time.perf_counter() - started
        ids = output[0, prompt:].tolist()
        end = next((i for i, token in enumerate(ids) if token in self.stops), None)
        ids = ids if end is None else ids[: end + 1]
        reply = parse_reply(self.tokenizer.decode(ids, skip_special_tokens=True), self.format, request["tools"])
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "reasoning_content": reply.reasoning}
        message["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in reply.calls]
        finish = "length" if end is None else "stop"
        log.info("local.reply", day=day, tokens=len(ids), latency_s=round(seconds, 3), finish_reason=finish)
        return {
            "choices": [{"message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": len(ids)},
        }

    def _sampling(self, request: dict[str, Any]) -> dict[str, Any]:
        """generate()'s arguments: greedy at temperature 0, else sampling (top_k as the model's defaults say)."""
        sampling: dict[str, Any] = {"max_new_tokens": request.get("max_tokens") or MAX_TOKENS}
        if request["temperature"] == 0:
            return sampling | {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        sampling |= {"do_sample": True, "temperature": request["temperature"]}
        if "top_p" in request:
            sampling["top_p"] = request["top_p"]
        return sampling
