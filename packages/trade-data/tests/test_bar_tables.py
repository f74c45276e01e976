"""A plugin's bar table that could not be stored is refused where the plugin registers it, not in a build."""

from __future__ import annotations

import numpy as np
import pytest

from trade_core import hookimpl
from trade_core.plugins import new_manager
from trade_data import hookspecs
from trade_data.bar_tables import BAR_TABLES, BarTable


def _rows(bars):  # type: ignore[no-untyped-def]
    return np.zeros((len(bars), 1), dtype=np.float32)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"every": 0}, "every must be a whole number of bars >= 1, not 0"),
        ({"every": 2.5}, "every must be a whole number of bars >= 1, not 2.5"),
        ({"every": True}, "every must be a whole number of bars >= 1, not True"),
        ({"dtype": np.int64}, "dtype must be a numpy float type"),
        ({"dtype": "float32"}, "dtype must be a numpy float type"),
    ],
)
def test_a_table_that_cannot_be_stored_is_refused(options: dict, problem: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=problem):
        BarTable(name="bad", version="1", columns=("x",), compute=_rows, **options)


def test_a_plugin_registering_one_is_reported_and_its_tables_unused() -> None:
    class Plugin:
        @hookimpl
        def trade_register_bar_tables(self, register):  # type: ignore[no-untyped-def]
            register(BarTable(name="fine", version="1", columns=("x",), compute=_rows))
            register(BarTable(name="bad", version="1", columns=("x",), compute=_rows, every=0))

    manager = new_manager()
    manager.pm.add_hookspecs(hookspecs)
    manager.register(Plugin(), "bad-tables")
    assert BAR_TABLES.all(manager) == {}  # not half-registered
    assert manager.failed("bad-tables", "trade_register_bar_tables")
    assert "every must be a whole number of bars >= 1, not 0" in manager.failures[0].one_line()
