"""Fixtures for testing trade-agent and its plugins (a pytest plugin, like ``tox.pytest``).

Installed with trade-core and opt-in: a test module names it in ``pytest_plugins`` (a conftest's
``pytest_configure`` imports it with ``config.pluginmanager.import_plugin``), so core tests and third-party
plugin authors use the same helpers and nobody else's pytest session loads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from trade_core.plugins import TradePluginManager, new_manager


@dataclass(frozen=True)
class TradeRun:
    """Outcome of one ``trade`` process."""

    code: int
    out: str
    err: str


def run_trade(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 300,
) -> TradeRun:
    """Run the installed ``trade`` console script in a fresh process (real entry points, real exit code)."""
    environment = {**os.environ, **(env or {})}
    script = Path(sys.executable).with_name("trade")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from trade_core.cli import main; main()"]
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        input=input,
        timeout=timeout,
        check=False,
    )
    return TradeRun(done.returncode, done.stdout, done.stderr)


_RECORD_IMPORTS = """
import json, sys
from trade_core.cli import main
try:
    main(sys.argv[2:])
finally:  # click ends every command with SystemExit
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def imports_of(*args: str, tmp_path: Path) -> set[str]:
    """The modules a fresh ``trade *args`` process has imported by its end, for tests of what starting costs.

    Deterministic where a timing is not: ``--help`` that imports pandas is slow on every machine.
    """
    record = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _RECORD_IMPORTS, str(record), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(record.read_text(encoding="utf-8")))


@contextmanager
def inline_plugin(manager: TradePluginManager, plugin: object, name: str) -> Iterator[object]:
    """Register ``plugin`` for the duration of a ``with`` block, then unregister it."""
    manager.register(plugin, name)
    try:
        yield plugin
    finally:
        manager.unregister(name)


@pytest.fixture
def plugin_manager() -> TradePluginManager:
    """A fresh manager with the core hookspecs and no plugins loaded."""
    return new_manager()
