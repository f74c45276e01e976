"""``trade eval serve``: the vLLM OpenAI server command whose parsers match the model's tool-call format."""

from __future__ import annotations

import importlib.util
import shlex
import signal
import sys
from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_core.params import FiniteRange
from trade_eval.serving import MAX_MODEL_LEN, port_free, serve, vllm_command, vllm_install

START_TIMEOUT_S = 900
"""vLLM loads a model for about a minute on CPU, several for a large one on a GPU."""


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
@click.option(
    "--base-model",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="For a LoRA adapter folder: its base model, instead of the one adapter_config.json names.",
)
@click.option("--run", is_flag=True, help="Start vLLM, wait until it answers, print its URL; Ctrl-C stops it.")
@click.option(
    "--start-timeout",
    default=START_TIMEOUT_S,
    show_default=True,
    type=FiniteRange(min=1),
    help="With --run: seconds to wait for vLLM's /health.",
)
def serve_command(
    model_dir: Path,
    name: str,
    host: str,
    port: int,
    max_model_len: int,
    tool_call_parser: str | None,
    base_model: Path | None,
    run: bool,
    start_timeout: float,
) -> None:
    """Serve MODEL_DIR (a merged Hugging Face checkpoint, or a LoRA adapter on its base with --enable-lora)
    with vLLM's OpenAI-compatible API for the backtest.

    \b
    The tool-call parser follows the model family in config.json: Qwen3 -> hermes, Qwen3.5 -> qwen3_coder
    (a mismatch turns every tool call into plain text); reasoning parser qwen3; auto tool choice on.
    The command is printed on stdout (run it where vLLM is installed); with --run it is started here,
    its base URL printed on stdout once /health answers, and Ctrl-C stops it.

    \b
    trade eval serve checkpoints/merged
    trade eval serve checkpoints/merged --run
    """
    argv = vllm_command(
        model_dir,
        name=name,
        host=host,
        port=port,
        max_model_len=max_model_len,
        parser=tool_call_parser,
        base=base_model,
        python=sys.executable if run else "python",
    )
    client_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base_url = f"http://{client_host}:{port}/v1"
    then = f"then: trade eval backtest --base-url {base_url} --model {name} ..."
    if not run:
        click.echo(then, err=True)
        click.echo(shlex.join(argv))
        return
    if importlib.util.find_spec("vllm") is None:
        raise TradeError("vLLM is not installed in this environment", hint=vllm_install())
    if not port_free(host, port):
        raise TradeError(f"port {port} on {host} is in use", hint="stop what listens there, or pass --port N")
    for stop in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell starts background jobs with it ignored
        signal.signal(stop, _interrupt)
    click.echo(f"starting: {shlex.join(argv)}", err=True)
    try:
        with serve(argv, f"http://{client_host}:{port}/health", timeout=start_timeout) as process:
            click.echo(f"{then}\nCtrl-C stops vLLM", err=True)
            click.echo(base_url)  # last: a script reading it finds the server up and the hints written
            code = process.wait()
    except KeyboardInterrupt:
        click.echo("vLLM stopped", err=True)
        return
    raise TradeError(f"vLLM exited with status {code}", hint="its log is above")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
