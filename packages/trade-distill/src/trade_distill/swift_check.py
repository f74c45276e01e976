"""Every exported row read and encoded by ms-swift itself, as ``swift sft`` will: its lengths in tokens.

``swift sft`` loads a file with ``load_dataset`` (normalising roles and tools) and encodes each row with the
model's template; a row it cannot read fails the run late, and a row longer than ``--max_length`` is silently
dropped (its default ``--truncation_strategy delete``). Checking at export time finds both before training.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from pathlib import Path

from trade_core.errors import TradeError, error_line
from trade_distill.swift_models import SwiftModel

SWIFT_INSTALL = "pip install 'trade-distill[swift]'"
"""ms-swift 4.6 (its own environment: it pins transformers < 5.20 and trl < 1.0)."""


def has_swift() -> bool:
    return importlib.util.find_spec("swift") is not None


def loss_scale(template: str) -> str:
    """``swift sft``'s loss scale for ``template``: a hybrid-thinking template adds ``ignore_empty_think`` (the
    empty ``<think>`` block it prepends to a reply without reasoning is not trained), as the CLI does."""
    from swift.template import TEMPLATE_MAPPING

    meta = TEMPLATE_MAPPING[template]
    return "default+ignore_empty_think" if meta.is_thinking and meta.non_thinking_prefix else "default"


def encoded_lengths(rows_file: Path, model_dir: Path, names: SwiftModel) -> list[int]:
    """The tokens of each row of ``rows_file`` as ms-swift encodes it for training, in file order.

    A row ms-swift cannot load or encode, or one with nothing to learn (every label masked), is an error naming it.
    """
    from swift import get_processor, get_template
    from swift.dataset import load_dataset

    processor = get_processor(str(model_dir), model_type=names.model_type)
    template = get_template(
        processor,
        template_type=names.template,
        agent_template=names.agent_template,
        truncation_strategy="raise",
        loss_scale=loss_scale(names.template),
    )
    template.set_mode("train")
    try:
        dataset, _ = load_dataset([str(rows_file)], strict=True, load_from_cache_file=False)
    except Exception as error:  # ms-swift's own reasons, in one line
        raise TradeError(f"{rows_file}: ms-swift cannot load it: {error_line(error)}") from None
    lengths = []
    for number, row in enumerate(dataset, start=1):
        try:
            encoded = template.encode(row)
        except Exception as error:
            raise TradeError(f"row {number}: ms-swift cannot encode it: {error_line(error)}") from None
        if all(label == -100 for label in encoded["labels"]):
            raise TradeError(f"row {number}: nothing to train on (every token is masked)")
        lengths.append(len(encoded["input_ids"]))
    return lengths


def percentile(values: Sequence[int], q: float) -> int:
    """The nearest-rank percentile (a length that occurs)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q / 100) - 1)]


def length_line(lengths: Sequence[int]) -> str:
    return (
        f"tokens per row: min {min(lengths):,}, p50 {percentile(lengths, 50):,}, p90 {percentile(lengths, 90):,}, "
        f"max {max(lengths):,}"
    )
