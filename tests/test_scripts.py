"""The repository's scripts run (scripts/ is not part of any package)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.qlib
def test_the_alpha158_script_checks_the_shipped_table_against_qlib() -> None:
    pytest.importorskip("qlib")
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "alpha158_table.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
