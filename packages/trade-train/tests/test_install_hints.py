"""Install hints are safe where they are printed: a torch that is installed is never named, so pip keeps it.

Each case runs the real ``trade`` in a fresh process in which the named packages cannot be imported
(``sys.modules[name] = None``, Python's own way to block an import), so both branches run in any venv that has them:
the default one has no torch, ``tox -e verl``'s has torch 2.13.0 (CPU) and verl.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

CPU_TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
"""PyPI's Linux torch is the CUDA build (gigabytes of CUDA libraries); the CPU tests use the CPU wheel."""
TRADE_WITHOUT = (
    "import sys; sys.modules.update(dict.fromkeys(sys.argv.pop(1).split(','))); from trade_core.cli import main; main()"
)


def trade_without(hidden: tuple[str, ...], *args: str) -> str:
    """stderr of ``trade ARGS`` run where none of ``hidden`` imports; it must fail with exit status 2."""
    done = subprocess.run(
        [sys.executable, "-c", TRADE_WITHOUT, ",".join(hidden), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    return done.stderr.strip()


@pytest.mark.parametrize("torch_here", [False, True], ids=["no-torch", "torch"])
def test_install_hints_name_torch_only_where_none_is_installed(torch_here: bool, tmp_path: Path) -> None:
    if torch_here and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here (tox -e verl has it)")
    hidden = ("transformers", "verl") if torch_here else ("torch", "transformers", "verl")
    before = "" if torch_here else f"{CPU_TORCH} && "
    needs = "transformers" if torch_here else "torch"  # the tiny model imports torch first
    tiny = trade_without(hidden, "model", "tiny", "--out", str(tmp_path / "tiny"))
    assert tiny == f"error: trade model tiny needs {needs} ({before}pip install 'trade-train[tiny]')"
    (tmp_path / "checkpoints" / "global_step_1" / "actor").mkdir(parents=True)
    export = trade_without(hidden, "train", "export", str(tmp_path / "checkpoints"), "--out", str(tmp_path / "hf"))
    assert export == f"error: verl is not installed here ({before}pip install 'trade-train[verl]')"
