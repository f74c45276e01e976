"""Modules renamed so their names say what they are still answer under the old name, with a warning."""

from __future__ import annotations

import pytest

from trade_tools import sampler


def test_the_task_sampler_under_its_old_name_warns_and_is_the_same() -> None:
    with pytest.warns(DeprecationWarning, match="trade_tools.sampler"):
        from trade_tools.tasks import day_task
    assert day_task is sampler.day_task
