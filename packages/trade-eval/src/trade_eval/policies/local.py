"""``local``: a Hugging Face causal LM loaded in-process with transformers plays the day, with no server.

Each reply answers the very request the ``llm`` policy would send a server, the way vLLM serves Qwen models:
the conversation and the Episode's tool schemas rendered by the model's own chat template (thinking as the
template defaults), sampled with the run's temperature, top_p and max_tokens from a seed per day and reply
(greedy at temperature 0), the reasoning and tool calls read from the text by
:mod:`trade_tools.toolcalls` in the family's format, and the answer played as the ``llm`` policy plays a
server's. ``--model`` is the model folder; ``--set device=cuda:0`` picks the device (default: the first GPU if
any, else CPU); on CPU ``--set precision=auto`` loads the weights in bfloat16 where the CPU multiplies it in hardware
(``bfloat16`` always, ``float32`` the default).

A process loads a model once, and one worker thread generates for it in batches: the requests that arrive while
a generation runs (the other episodes of a tasks run) wait, and the next generation answers up to ``--set batch=N``
of them together (default 16), left-padded, each row stopping at its own end or ``max_tokens``; the event loop
keeps the episodes in flight meanwhile. Requests with other sampling settings are generated apart. Each prompt
is read alone (in a model of attention layers only: causal attention, no mask) and the batch decodes from the
joined cache, so batching saves decode steps, not prompt reading, and a batch runs as long as its longest reply.
A prompt is read from the longest prefix it shares with a recent one (:mod:`trade_core.prompt_cache`: the system
prompt every day shares, a task's other samples, the day's earlier turns), within ``--set prompt_cache_mb=N`` of
memory (default 4096; 0 reads every prompt whole).

What batching keeps: a batch of one is the unbatched generation, token for token. In a batch, each row samples
from its own generator seeded by its request (one uniform a token, by inverse CDF: :mod:`trade_core.cpu_generation`),
so no row's seed or draws depend on the others. But padding and the batch's shape change the order of float sums
in attention and matmuls, so a row's logits can differ from its unbatched run in the last bits: a greedy token
flips only where two logits tie to that precision, a sampled one only where its uniform falls that close to a
boundary of the cumulative distribution, and the text goes its own way after. Which requests share a batch
depends on timing, so a rerun writes the same text up to such flips (the tests find batched greedy rows equal to
unbatched ones on the tiny model, but do not promise it for every model and prompt).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import structlog

from trade_core.cpu_generation import cpu_precision, fast_cpu_sampling, grouped_attention
from trade_core.errors import TradeError
from trade_core.prompt_cache import BUDGET_MB, PromptCache
from trade_eval.policies.llm import chat_request, play_reply
from trade_eval.policy import DayUsage, Policy, RunSettings
from trade_tools.day import TradingDay
from trade_tools.toolcalls import model_format, parse_reply

log = structlog.get_logger("trade.eval.local")

MAX_TOKENS = 2048
"""Completion tokens per reply without ``--max-tokens`` (a server's limit is the context left)."""
BATCH = 16
"""Requests generated together without ``--set batch`` (docs/benchmarks.md, "Batched local generation": what it
gains depends on how much of a reply is its prompt, which every row still reads alone)."""
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
"""PyPI's Linux torch is the CUDA build, gigabytes of CUDA libraries."""


class LocalPolicy(Policy):
    name = "local"
    description = "a Hugging Face model folder run in-process with transformers (CPU or one GPU), no server"
    plays_in_workers = False  # its batching thread and the model's device stay in the process that loaded them

    def check(self, settings: RunSettings) -> None:
        """Refuse a run whose model cannot be loaded before any day starts (and keep it loaded for the days)."""
        _loaded(settings)

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        model = _loaded(settings)
        usage = DayUsage()
        tools = day.episode.tool_schemas()
        while day.is_open:
            usage.requests += 1
            request = chat_request(day, settings, tools)
            answer = await asyncio.wrap_future(model.submit(request, str(day.episode.task.date)))
            play_reply(day, answer, usage)
        return usage


def _loaded(settings: RunSettings) -> LocalModel:
    if not settings.model:
        raise TradeError("policy 'local' needs a model folder", hint="pass --model DIR (a Hugging Face model folder)")
    batch = settings.options.get("batch", BATCH)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TradeError(f"batch {batch!r} is not a number of requests (1 or more)", hint=f"e.g. --set batch={BATCH}")
    memory = settings.options.get("prompt_cache_mb", BUDGET_MB)
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
        raise TradeError(
            f"prompt_cache_mb {memory!r} is not a number of megabytes (0 or more)",
            hint=f"e.g. --set prompt_cache_mb={BUDGET_MB}, or 0 to read every prompt whole",
        )
    try:
        precision = cpu_precision(settings.options.get("precision", "float32"))
    except ValueError as error:
        raise TradeError(str(error), hint="e.g. --set precision=auto") from None
    folder = Path(settings.model).expanduser().resolve()
    return _load(folder, str(settings.options.get("device", "")), batch, memory, precision)


_LOADED: dict[tuple[Any, ...], LocalModel] = {}


def _load(
    folder: Path, device: str, batch: int, prompt_cache_mb: int = BUDGET_MB, precision: str = "float32"
) -> LocalModel:
    """One model per folder, device and batch size in a process: loading is seconds, a day's reply much less."""
    key = (folder, device, batch, prompt_cache_mb, precision)
    if key in _LOADED:
        return _LOADED[key]
    fmt = model_format(folder).tool_calls  # before the imports: a wrong folder is the likelier mistake
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        command = "pip install 'trade-eval[local]'"
        raise TradeError(
            f"policy 'local' needs {' and '.join(missing)}",
            hint=command if "torch" not in missing else f"{CPU_TORCH} && {command}",  # the extra keeps a torch
        )
    _LOADED[key] = LocalModel(folder, fmt, device, batch, prompt_cache_mb, precision)
    return _LOADED[key]


def unload() -> None:
    """Let go of every model this process loaded, their prompt caches with them: a process that evaluates one
    model after another (the quickstart) holds one at a time. A later run loads its model again."""
    while _LOADED:
        _LOADED.popitem()[1].close()


Pending = tuple[dict[str, Any], str, Future[dict[str, Any]]]
"""A request waiting for its batch: the request, its day (for the log) and the future its answer goes to."""


class LocalModel:
    """A model folder loaded for generation, answering chat-completion requests as a vLLM server would, in batches."""

    def __init__(
        self,
        folder: Path,
        fmt: str,
        device: str = "",
        batch: int = BATCH,
        prompt_cache_mb: int = BUDGET_MB,
        precision: str = "float32",
    ) -> None:
        """``device``: a torch device; '' picks the first GPU if there is one, else the CPU. ``batch``: the most
        requests one generation answers. ``prompt_cache_mb``: memory for recent prompts' keys and values (0: none).
        ``precision``: the weights' type on CPU (bfloat16 only pays where the CPU multiplies it in hardware:
        :func:`~trade_core.cpu_generation.cpu_precision`); a GPU takes the folder's own."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
        from transformers.cache_utils import DynamicLayer

        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.format = fmt
        self.batch = batch
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        dtype = getattr(torch, precision) if self.device.type == "cpu" else "auto"
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(self.device).eval()
        if self.device.type == "cpu":
            grouped_attention(self.model)  # grouped-query keys kept grouped under the batch's padding mask
        self.stops = set(self.model.generation_config.eos_token_id or [])
        self.pad = self.tokenizer.pad_token_id or 0  # masked out, and cut off after a row's stop: any id pads
        layers = DynamicCache(config=self.model.config).layers
        attention_only = all(type(layer) is DynamicLayer for layer in layers)  # caches that left-pad and crop
        self.prompts = PromptCache(self.model, prompt_cache_mb if attention_only else 0)
        self._attention_only = attention_only
        self._lock = threading.Lock()
        self._waiting: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()  # None: close
        self.worker = threading.Thread(target=self._serve, name=f"local-{folder.name}", daemon=True)
        self.worker.start()
        log.info("local.loaded", model=str(folder), device=str(self.device), format=fmt, batch=batch)

    def submit(self, request: dict[str, Any], day: str = "") -> Future[dict[str, Any]]:
        """The future answer to ``request`` (the ``llm`` policy's), generated with the others waiting then."""
        answer: Future[dict[str, Any]] = Future()
        self._waiting.put((request, day, answer))
        return answer

    def complete(self, request: dict[str, Any], day: str = "") -> dict[str, Any]:
        """The chat.completion answer to ``request``, reasoning and calls parsed out (waits for its batch)."""
        return self.submit(request, day).result()

    def answer(self, requests: list[dict[str, Any]], days: list[str] | None = None) -> list[dict[str, Any]]:
        """The answers to ``requests``, in order: those with the same sampling settings generated as one batch."""
        days = days or [""] * len(requests)
        groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
        for row, request in enumerate(requests):
            groups.setdefault(tuple(self._sampling(request).items()), []).append(row)
        answers: dict[int, dict[str, Any]] = {}
        with self._lock:
            for rows in groups.values():
                answers |= zip(rows, self._generate([requests[i] for i in rows], [days[i] for i in rows]), strict=True)
        return [answers[row] for row in range(len(requests))]

    def close(self) -> None:
        """End the worker once what it was given is answered; the model goes when the last reference does."""
        self._waiting.put(None)

    def _serve(self) -> None:
        """The worker: take what waits (up to a batch), answer it as one, hand each answer to its caller; after
        :meth:`close`'s mark, stop."""
        closed = False
        while not closed:
            taken = [self._waiting.get()]
            with contextlib.suppress(queue.Empty):
                while len(taken) < self.batch and taken[-1] is not None:
                    taken.append(self._waiting.get_nowait())
            closed = taken[-1] is None
            taken = [pending for pending in taken if pending is not None and pending[2].set_running_or_notify_cancel()]
            if not taken:
                continue
            try:
                answers = self.answer([request for request, _, _ in taken], [day for _, day, _ in taken])
            except Exception as error:  # each caller raises it (its episode fails); the worker goes on
                for *_, future in taken:
                    future.set_exception(error)
            else:
                for (*_, future), answer in zip(taken, answers, strict=True):
                    future.set_result(answer)

    def _generate(self, requests: list[dict[str, Any]], days: list[str]) -> list[dict[str, Any]]:
        """One generation for requests sharing their sampling: left-padded, row i sampling from request i's seed."""
        import torch

        prompts = [
            self.tokenizer.apply_chat_template(
                request["messages"], tools=request["tools"], add_generation_prompt=True, return_dict=True
            )["input_ids"]
            for request in requests
        ]
        generators = [torch.Generator().manual_seed(request["seed"]) for request in requests]
        started = time.perf_counter()  # the generation's own time, not the wait for a batch
        sampling = self._sampling(requests[0])
        with torch.inference_mode(), fast_cpu_sampling(threads=None, generators=generators):
            if self._attention_only and (len(prompts) > 1 or self.prompts.budget):
                ids, mask, cache = self.prompts.joined(prompts, self.pad, room=sampling["max_new_tokens"])
            else:
                width = max(len(prompt) for prompt in prompts)
                ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in prompts], device=self.device)
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
                cache = None
            output = self.model.generate(
                input_ids=ids, attention_mask=mask, past_key_values=cache, pad_token_id=self.pad, **sampling
            )
        seconds = time.perf_counter() - started
        width = ids.shape[1]
        return [
            self._reply(request, output[row, width:].tolist(), len(prompt), day, seconds, len(requests))
            for row, (request, prompt, day) in enumerate(zip(requests, prompts, days, strict=True))
        ]

    def _reply(
        self, request: dict[str, Any], ids: list[int], prompt: int, day: str, seconds: float, batch: int
    ) -> dict[str, Any]:
        """A row's tokens, cut after its first stop, as the chat.completion answer (and its log line)."""
        end = next((i for i, token in enumerate(ids) if token in self.stops), None)
        ids = ids if end is None else ids[: end + 1]
        reply = parse_reply(self.tokenizer.decode(ids, skip_special_tokens=True), self.format, request["tools"])
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "reasoning_content": reply.reasoning}
        message["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in reply.calls]
        finish = "length" if end is None else "stop"
        latency = round(seconds, 3)
        log.info("local.reply", day=day, tokens=len(ids), latency_s=latency, finish_reason=finish, batch=batch)
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
