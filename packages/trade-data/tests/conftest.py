"""Fixtures for trade-data's tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures (a conftest below the rootdir cannot name them in ``pytest_plugins``)."""
    config.pluginmanager.import_plugin("trade_data.testing")
