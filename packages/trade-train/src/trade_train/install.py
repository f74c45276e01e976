"""Install hints that are safe in the environment that prints them: pip never swaps the torch installed there."""

from __future__ import annotations

import importlib.util

CPU_TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
"""The CPU wheel the CPU tests use; PyPI's Linux torch is the CUDA build, gigabytes of CUDA libraries."""


def install_hint(extras: str) -> str:
    """``pip install 'trade-train[EXTRAS]'``, after the CPU torch where there is no torch.

    The extras need torch without pinning it, so pip keeps one that is installed (vLLM's CUDA build, the
    Ascend image's); naming torch beside them would replace it, and with none installed pip would fetch PyPI's.
    """
    command = f"pip install 'trade-train[{extras}]'"
    return command if importlib.util.find_spec("torch") else f"{CPU_TORCH} && {command}"
