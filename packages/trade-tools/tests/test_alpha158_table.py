"""Alpha158 ships as a table in trade-tools: named factors work without pyqlib, and the table is Qlib's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trade_tools.alpha import alpha158_expressions

POOL = ["SH600519", "SZ000001"]
CALL_AND_LIST_QLIB = """
import sys
from trade_core.cli import main
try:
    main(sys.argv[1:])
finally:
    print(sorted(name for name in sys.modules if name.partition(".")[0] == "qlib"))
"""


def test_a_named_factor_call_never_imports_qlib(sample_dataset: Path) -> None:
    """`trade tools call compute_alpha_factor ROC20` in a fresh process leaves ``qlib`` out of sys.modules."""
    arguments = json.dumps({"expression": "ROC20", "symbols": POOL})
    command = ["tools", "call", "compute_alpha_factor", "--data", str(sample_dataset), "--date", "2024-06-14"]
    run = subprocess.run(
        [sys.executable, "-c", CALL_AND_LIST_QLIB, *command, "--pool", ",".join(POOL), "--args", arguments],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    text, imported = run.stdout.strip().rsplit("\n", 1)
    assert text.splitlines()[1] == "公式：Ref($close, 20)/$close；含义：20日前收盘价÷今日收盘价，越大表示近20日跌得越多"
    assert imported == "[]"


@pytest.mark.qlib
def test_the_table_is_qlibs_alpha158() -> None:
    """Name by name and in order, the shipped table is pyqlib's ``Alpha158DL.get_feature_config()``."""
    pytest.importorskip("qlib")
    from qlib.contrib.data.loader import Alpha158DL

    fields, names = Alpha158DL.get_feature_config()
    shipped = alpha158_expressions()
    assert list(shipped) == names
    for name, text in zip(names, fields, strict=True):
        assert shipped[name] == text, name
