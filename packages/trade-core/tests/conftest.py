"""Fixtures for trade-core's tests: throwaway plugin distributions, really installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def installed_plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the fixture distributions into a private folder; put it on PYTHONPATH to use them.

    Installing (not importing from the source tree) gives them real ``.dist-info`` entry points,
    exactly what a user's ``pip install my-plugin`` gives.
    """
    target = tmp_path_factory.mktemp("site")
    for name in ("trade-plugin-hello", "trade-plugin-clash", "trade-plugin-broken"):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target / name),
             str(FIXTURES / name)],
            check=True,
        )  # fmt: skip
    return target
