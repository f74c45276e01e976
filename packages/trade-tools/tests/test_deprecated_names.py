"""Modules renamed so their names say what they are still answer under the old name, with a warning."""

from __future__ import annotations

import importlib

import pytest

from trade_tools import grading, sampler


def test_the_task_sampler_under_its_old_name_warns_and_is_the_same() -> None:
    with pytest.warns(DeprecationWarning, match="trade_tools.sampler"):
        from trade_tools.tasks import day_task
    assert day_task is sampler.day_task


@pytest.mark.parametrize("name", ["GroundTruth", "Reward"])
def test_the_grading_records_under_their_old_module_warn_and_are_the_same(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"trade_tools.grading.{name}"):
        old = getattr(importlib.import_module("trade_tools.records"), name)
    assert old is getattr(grading, name)
