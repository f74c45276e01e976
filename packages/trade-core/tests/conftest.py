"""Fixtures for trade-core's tests: throwaway plugin distributions, really installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
DISTRIBUTIONS = ("trade-plugin-hello", "trade-plugin-clash", "trade-plugin-broken", "trade-plugin-faulty")


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-core's fixtures (a conftest below the rootdir cannot name them in ``pytest_plugins``)."""
    config.pluginmanager.import_plugin("trade_core.testing")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that installs the fixture distributions is slow (about 15 s once per session)."""
    for item in items:
        if "installed_plugins" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def installed_plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the fixture distributions into a private folder; put it on PYTHONPATH to use them.

    Installing (not importing from the source tree) gives them real ``.dist-info`` entry points,
    exactly what a user's ``pip install my-plugin`` gives. The installs run side by side: each is
    mostly waiting for pip's isolated build environment.
    """
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    installs = [subprocess.Popen([*pip, str(target / name), str(FIXTURES / name)]) for name in DISTRIBUTIONS]
    assert [install.wait() for install in installs] == [0] * len(installs)
    return target
