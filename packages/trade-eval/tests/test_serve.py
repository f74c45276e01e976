"""`trade eval serve`: the vLLM command whose parsers match the model family in config.json."""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_eval.serving import model_family, vllm_command

QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64}
QWEN3_5 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": {}}


def model(tmp_path: Path, config: dict[str, object] | None, name: str = "merged") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize(("config", "parser"), [(QWEN3, "hermes"), (QWEN3_5, "qwen3_coder")], ids=["qwen3", "qwen3.5"])
def test_the_printed_command_parses_the_family_s_tool_calls(tmp_path: Path, config: dict, parser: str) -> None:
    folder = model(tmp_path, config)
    run = run_trade("eval", "serve", str(folder))
    assert run.code == 0, run.err
    argv = shlex.split(run.out)
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"] and flag(argv, "--model") == str(folder)
    assert (flag(argv, "--tool-call-parser"), flag(argv, "--reasoning-parser")) == (parser, "qwen3")
    assert (flag(argv, "--served-model-name"), flag(argv, "--port"), flag(argv, "--host")) == (
        "trader_agent",
        "8001",
        "127.0.0.1",
    )
    assert flag(argv, "--max-model-len") == "20480" and "--enable-auto-tool-choice" in argv
    assert "--base-url http://127.0.0.1:8001/v1 --model trader_agent" in run.err


def test_names_ports_and_the_parser_can_be_chosen(tmp_path: Path) -> None:
    folder = model(tmp_path, {"model_type": "mystery"})
    argv = vllm_command(folder, name="m", host="0.0.0.0", port=9000, max_model_len=4096, parser="hermes")
    assert [flag(argv, f) for f in ("--served-model-name", "--host", "--port", "--max-model-len")] == [
        "m",
        "0.0.0.0",
        "9000",
        "4096",
    ]
    run = run_trade("eval", "serve", str(folder), "--tool-call-parser", "qwen3_coder", "--host", "0.0.0.0")
    assert run.code == 0 and flag(shlex.split(run.out), "--tool-call-parser") == "qwen3_coder"
    assert "http://127.0.0.1:8001/v1" in run.err


def test_the_family_falls_back_to_the_architecture(tmp_path: Path) -> None:
    assert model_family(model(tmp_path, {"architectures": ["Qwen3_5MoeForCausalLM"]}, "a")) == "qwen3_5_moe"
    assert model_family(model(tmp_path, {"architectures": ["Qwen3ForCausalLM"]}, "b")) == "qwen3"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "has no config.json (pass a Hugging Face model folder (merged checkpoint))"),
        ({"model_type": "llama"}, "no known tool-call format for model family 'llama' (pass --tool-call-parser NAME"),
        ({}, "no known tool-call format for model family '(none in config.json)'"),
    ],
    ids=["no config", "unknown family", "no family"],
)
def test_a_folder_without_a_known_family_is_one_line(tmp_path: Path, config: dict | None, message: str) -> None:
    run = run_trade("eval", "serve", str(model(tmp_path, config)))
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("error: ") and message in run.err and len(run.err.strip().splitlines()) == 1


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_run_without_vllm_says_how_to_get_it(tmp_path: Path) -> None:
    run = run_trade("eval", "serve", str(model(tmp_path, QWEN3)), "--run")
    assert run.code == 2 and run.err.startswith("error: vLLM is not installed in this environment (pip install vllm")
    assert len(run.err.strip().splitlines()) == 1
