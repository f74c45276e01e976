"""trade's pytest fixtures are opt-in: a pytest session of someone else's project in the same environment does not
import trade-data, numpy or pandas; a test module that names ``trade_data.testing`` in ``pytest_plugins`` gets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, os, sys

def test_record_modules():
    with open(os.environ["PROBE_MODULES"], "w") as out:
        json.dump(sorted(sys.modules), out)
"""
HEAVY = {"numpy", "pandas", "trade_data"}
OURS = {"trade_core", "trade_data", "trade_tools", "trade_reward", "trade_eval", "trade_train", "trade_distill"}


def _session_packages(folder: Path, header: str = "") -> set[str]:
    """The top-level packages a fresh ``pytest`` session in ``folder`` (outside this repository) has imported."""
    (folder / "test_probe.py").write_text(header + PROBE, encoding="utf-8")
    record = folder / "modules.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_probe.py"],
        cwd=folder,
        env={**os.environ, "PROBE_MODULES": str(record)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {name.split(".")[0] for name in json.loads(record.read_text(encoding="utf-8"))}


def test_a_plain_pytest_session_imports_no_trade_package_numpy_or_pandas(tmp_path: Path) -> None:
    assert _session_packages(tmp_path) & (HEAVY | OURS) == set()


def test_a_test_module_opts_in_with_pytest_plugins(tmp_path: Path) -> None:
    assert _session_packages(tmp_path, 'pytest_plugins = ["trade_data.testing"]\n') >= HEAVY
