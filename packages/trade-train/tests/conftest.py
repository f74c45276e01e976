"""Fixtures shared by trade-train's tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures and the taught tiny model (a conftest below the rootdir cannot name them in
    ``pytest_plugins``), where they are installed: ``tox -e resolve`` runs the resolver tests with uv alone."""
    for plugin in ("trade_data.testing", "trade_train.testing"):
        if importlib.util.find_spec(plugin.partition(".")[0]) is not None:
            config.pluginmanager.import_plugin(plugin)


@pytest.fixture(scope="session")
def tasks(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real tasks folder (train and val), built once per session."""
    from trade_reward.taskbuilder import build_tasks

    out = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(sample_dataset, out, split="train=2024-06-03:2024-06-28,val=2024-07-08:2024-07-31", pool_size="10-12")
    return out


@pytest.fixture(scope="session")
def anonymized_tasks(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tasks folder built with ``--anonymize``."""
    from trade_reward.taskbuilder import build_tasks

    out = tmp_path_factory.mktemp("anonymized") / "tasks"
    build_tasks(
        sample_dataset,
        out,
        split="train=2024-06-03:2024-06-28,val=2024-07-08:2024-07-31",
        pool_size="10-12",
        anonymize=True,
    )
    return out
