"""``trade eval serve``: the vLLM OpenAI server command whose parsers match the model's tool-call format."""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_eval.serving import MAX_MODEL_LEN, vllm_command


@click.command("serve", short_help="Print (or --run) the vLLM server command for a model folder.")
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--name", default="trader_agent", show_default=True, help="Model name clients send (backtest --model).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option(
    "--max-model-len",
    default=MAX_MODEL_LEN,
    show_default=True,
    type=click.IntRange(min=256),
    help="Tokens of prompt and replies per conversation.",
)
@click.option("--tool-call-parser", help="vLLM tool-call parser, instead of the one config.json's family implies.")
@click.option("--run", is_flag=True, help="Start the server in place of this process instead of printing the command.")
def serve_command(
    model_dir: Path, name: str, host: str, port: int, max_model_len: int, tool_call_parser: str | None, run: bool
) -> None:
    """Serve MODEL_DIR (a merged Hugging Face checkpoint) with vLLM's OpenAI-compatible API for the backtest.

    \b
    The tool-call parser follows the model family in config.json: Qwen3 -> hermes, Qwen3.5 -> qwen3_coder
    (a mismatch turns every tool call into plain text); reasoning parser qwen3; auto tool choice on.
    The command is printed on stdout (run it where vLLM is installed), or started with --run.

    \b
    trade eval serve checkpoints/merged
    trade eval serve checkpoints/merged --run
    """
    python = sys.executable if run else "python"
    argv = vllm_command(
        model_dir, name=name, host=host, port=port, max_model_len=max_model_len, parser=tool_call_parser, python=python
    )
    if run and importlib.util.find_spec("vllm") is None:
        raise TradeError(
            "vLLM is not installed in this environment",
            hint="pip install vllm (GPU; vllm-ascend on NPU), or run the command printed without --run where it is",
        )
    client_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    click.echo(f"then: trade eval backtest --base-url http://{client_host}:{port}/v1 --model {name} ...", err=True)
    if run:
        os.execv(python, argv)
    click.echo(shlex.join(argv))
