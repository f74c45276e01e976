"""``trade distill export``: trajectories as ms-swift agent SFT rows, checked by ms-swift's own encoding."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_core.files import atomic_write
from trade_distill.swift_models import AGENT_TEMPLATES

MAX_LENGTH = 20480
"""The tutorial's ``--max_length`` (a day's 16 turns with their tool texts)."""
OVER_LENGTH = {
    "error": "stop here",
    "drop": "left out of the file",
    "keep": "kept: `swift sft` drops them silently unless you pass -- --truncation_strategy right",
}
"""What happens to rows longer than ``--max-length``."""


@click.command("export")
@click.argument("sources", metavar="RUN_DIR_OR_FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("data/swift_train.jsonl"),
    show_default=True,
    help="ms-swift agent rows, one JSON per line, in input order.",
)
@click.option("--strip-thinking", is_flag=True, help="Leave the reasoning out (default: inline as <think>...</think>).")
@click.option(
    "--model",
    type=click.Path(path_type=Path, file_okay=False),
    help="Check every row with ms-swift's encoding for this model folder (the model to train).",
)
@click.option(
    "--template",
    type=click.Choice(AGENT_TEMPLATES),
    help="Agent template of the check (default: the model's; Qwen3 hermes, Qwen3.5 qwen3_5).",
)
@click.option("--max-length", type=click.IntRange(min=1), help=f"Tokens a row may have (default {MAX_LENGTH}).")
@click.option(
    "--over-length",
    type=click.Choice(list(OVER_LENGTH)),
    help="Rows over --max-length: error (default), drop them here, or keep them.",
)
def export_command(
    sources: tuple[Path, ...],
    out: Path,
    strip_thinking: bool,
    model: Path | None,
    template: str | None,
    max_length: int | None,
    over_length: str | None,
) -> None:
    """Write the trajectories of RUN_DIR_OR_FILE... (filtered first: `trade distill filter`) as ms-swift agent rows.

    \b
    trade distill export data/synth_filtered.jsonl --out data/swift_train.jsonl
    trade distill export data/synth_filtered.jsonl --model /models/Qwen3-4B --max-length 20480 --over-length drop
    """
    from trade_distill.agent_rows import agent_row
    from trade_distill.inputs import read_sources

    if model is None and (template or max_length or over_length):
        raise TradeError("--template, --max-length and --over-length set the ms-swift check", hint="add --model DIR")
    inputs = read_sources(sources)
    rows = [agent_row(t, strip_thinking=strip_thinking) for t in inputs.trajectories]
    if not rows:
        raise TradeError("no trajectories to export", hint="check the inputs (and what `trade distill filter` kept)")
    lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
    inputs.report()
    if model is not None:
        lines = checked(lines, model, template, max_length or MAX_LENGTH, over_length or "error")
    atomic_write(out, "".join(lines))
    click.echo(f"wrote {len(lines)} rows -> {out}")


def checked(lines: list[str], model: Path, template: str | None, max_length: int, over_length: str) -> list[str]:
    """``lines`` after ms-swift has encoded each one: its lengths told, rows over ``max_length`` handled."""
    from trade_distill.swift_check import SWIFT_INSTALL, encoded_lengths, has_swift, length_line
    from trade_distill.swift_models import swift_model

    names = swift_model(model)
    if template:
        names = names._replace(agent_template=template)
    if not has_swift():
        click.echo(f"not checked: ms-swift is not installed here ({SWIFT_INSTALL})")
        return lines
    with tempfile.TemporaryDirectory(prefix="trade-distill-") as scratch:
        rows_file = atomic_write(Path(scratch) / "rows.jsonl", "".join(lines))  # ms-swift reads a .jsonl by name
        lengths = encoded_lengths(rows_file, model, names)
    click.echo(f"ms-swift encodes every row ({names.template} template, {names.agent_template} tool calls)")
    click.echo(length_line(lengths))
    over = [n for n, length in enumerate(lengths) if length > max_length]
    click.echo(f"{len(over)} row(s) over --max-length {max_length}" + (f": {OVER_LENGTH[over_length]}" if over else ""))
    if over and over_length == "error":
        raise TradeError(
            f"{len(over)} row(s) over --max-length {max_length} tokens",
            hint="pass --over-length drop (leave them out) or keep (and train with a larger -- --max_length)",
        )
    if over_length == "drop":
        if len(over) == len(lines):
            raise TradeError(f"every row is over --max-length {max_length} tokens", hint="raise --max-length")
        dropped = set(over)
        return [line for n, line in enumerate(lines) if n not in dropped]
    return lines
