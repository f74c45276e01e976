"""Fixtures shared by trade-train's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures and the taught tiny model (a conftest below the rootdir cannot name them in
    ``pytest_plugins``)."""
    config.pluginmanager.import_plugin("trade_data.testing")
    config.pluginmanager.import_plugin("trade_train.testing")


@pytest.fixture(scope="session")
def tasks(real_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real tasks folder (train and val), built once per session."""
    from trade_reward.taskbuilder import build_tasks

    out = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(real_dataset, out, split="train=2024-06-03:2024-06-28,val=2024-07-08:2024-07-31", pool_size="10-12")
    return out


@pytest.fixture(scope="session")
def anonymized_tasks(real_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tasks folder built with ``--anonymize``."""
    from trade_reward.taskbuilder import build_tasks

    out = tmp_path_factory.mktemp("anonymized") / "tasks"
    build_tasks(
        real_dataset,
        out,
        split="train=2024-06-03:2024-06-28,val=2024-07-08:2024-07-31",
        pool_size="10-12",
        anonymize=True,
    )
    return out
