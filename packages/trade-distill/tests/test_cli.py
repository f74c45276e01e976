"""`trade distill` as a command group: what its help costs to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from trade_core.testing import imports_of


@pytest.mark.parametrize(
    "args", [["distill", "--help"], ["distill", "filter", "--help"], ["distill", "export", "--help"]]
)
def test_help_imports_no_numpy_or_pandas(args: list[str], tmp_path: Path) -> None:
    """``trade distill --help`` imports every subcommand's module: none may import the trajectory model for help."""
    assert imports_of(*args, tmp_path=tmp_path) & {"numpy", "pandas"} == set()
