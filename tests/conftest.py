"""Fixtures for the repository's own tests (benchmarks, scripts, the READMEs across packages)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures (the benchmarks and README examples run on the sample market)."""
    config.pluginmanager.import_plugin("trade_data.testing")
