"""`trade eval serve`: the vLLM command whose parsers match the model family in config.json."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_eval.serving import vllm_command
from trade_tools.toolcalls import STATED_FORMAT, model_family

FAKE_VLLM = Path(__file__).parent / "fixtures" / "fake_vllm"

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
        ({"model_type": "llama"}, "no known tool-call format for model family 'llama' (known families: qwen3,"),
        ({}, "no known tool-call format for model family '(none in config.json)'"),
    ],
    ids=["no config", "unknown family", "no family"],
)
def test_a_folder_without_a_known_family_is_one_line(tmp_path: Path, config: dict | None, message: str) -> None:
    run = run_trade("eval", "serve", str(model(tmp_path, config)))
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("error: ") and message in run.err and len(run.err.strip().splitlines()) == 1
    assert config is None or "pass --tool-call-parser NAME" in run.err


def test_a_base_that_states_its_format_is_served_with_it_and_without_reasoning(tmp_path: Path) -> None:
    """A `trade model` base is a llama by architecture that writes hermes calls and does not think."""
    run = run_trade("eval", "serve", str(model(tmp_path, {"model_type": "llama", STATED_FORMAT: "hermes"})))
    assert run.code == 0, run.err
    argv = shlex.split(run.out)
    assert flag(argv, "--tool-call-parser") == "hermes" and "--reasoning-parser" not in argv


def test_a_lora_adapter_is_served_on_its_base(tmp_path: Path) -> None:
    base = model(tmp_path, QWEN3, "base")
    adapter = model(tmp_path, None, "adapter")
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base), "r": 12}))
    run = run_trade("eval", "serve", str(adapter))
    assert run.code == 0, run.err
    argv = shlex.split(run.out)
    assert (flag(argv, "--model"), flag(argv, "--served-model-name")) == (str(base), "trader_agent-base")
    assert (flag(argv, "--lora-modules"), flag(argv, "--max-lora-rank")) == (f"trader_agent={adapter}", "16")
    assert "--enable-lora" in argv and flag(argv, "--tool-call-parser") == "hermes"  # the base's family
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen3-4B", "r": 8}))
    run = run_trade("eval", "serve", str(adapter))
    assert run.code == 2 and "whose base model 'Qwen/Qwen3-4B' is not a model folder here (pass --base-model" in run.err
    run = run_trade("eval", "serve", str(adapter), "--base-model", str(base))
    assert run.code == 0 and flag(shlex.split(run.out), "--model") == str(base)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_run_without_vllm_says_how_to_get_it(tmp_path: Path) -> None:
    run = run_trade("eval", "serve", str(model(tmp_path, QWEN3)), "--run")
    assert run.code == 2 and run.err.startswith("error: vLLM is not installed in this environment (")
    assert "pip install vllm" in run.err and len(run.err.strip().splitlines()) == 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def fake_vllm_env(record: Path, **extra: str) -> dict[str, str]:
    """`trade` with the stand-in vLLM (tests/fixtures/fake_vllm) first on its path."""
    path = os.pathsep.join(p for p in (str(FAKE_VLLM), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "FAKE_VLLM_RECORD": str(record), **extra}


def trade_process(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", "from trade_core.cli import main; main()", *args]
    ignore = functools.partial(signal.signal, signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore)


def first_line(process: subprocess.Popen[str], wait_s: float = 120) -> str:
    """The process's first stdout line; '' if it prints none in ``wait_s`` (so a wrong build fails, not hangs)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], wait_s)
    return process.stdout.readline() if ready else ""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_run_starts_the_server_prints_its_url_and_stops_it(tmp_path: Path, stop: signal.Signals) -> None:
    folder, port, record = model(tmp_path, QWEN3), free_port(), tmp_path / "record.json"
    served = trade_process("eval", "serve", str(folder), "--run", "--port", str(port), env=fake_vllm_env(record))
    try:
        assert first_line(served) == f"http://127.0.0.1:{port}/v1\n"
        started = json.loads(record.read_text())
        assert started["argv"] == vllm_command(folder, port=port)[3:]  # the printed command's flags, exactly
        assert alive(started["pid"]) and alive(started["worker"])
        served.send_signal(stop)
        _, err = served.communicate(timeout=120)
    finally:
        served.kill()
    assert served.returncode == 0, err
    assert "vLLM stopped" in err and f"--base-url http://127.0.0.1:{port}/v1 --model trader_agent" in err
    deadline = time.monotonic() + 30  # reaped by their parents' ends; the worker ignored SIGTERM
    while (alive(started["pid"]) or alive(started["worker"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(started["pid"]) and not alive(started["worker"])


def test_run_of_a_server_that_exits_or_a_busy_port_is_one_line(tmp_path: Path) -> None:
    folder, record = model(tmp_path, QWEN3), tmp_path / "record.json"
    port = str(free_port())
    run = run_trade(
        "eval", "serve", str(folder), "--run", "--port", port, env=fake_vllm_env(record, FAKE_VLLM_EXIT="3")
    )
    assert run.code == 2 and run.out == ""
    assert run.err.splitlines()[-1].startswith(
        f"error: vLLM exited with status 3 before answering http://127.0.0.1:{port}/health"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = str(taken.getsockname()[1])
        run = run_trade("eval", "serve", str(folder), "--run", "--port", busy, env=fake_vllm_env(record))
    assert (
        run.code == 2
        and run.err.splitlines()[-1]
        == f"error: port {busy} on 127.0.0.1 is in use (stop what listens there, or pass --port N)"
    )
    assert not record.exists()  # nothing was started
