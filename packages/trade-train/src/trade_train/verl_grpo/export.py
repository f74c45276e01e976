"""Turn a verl checkpoint into a HuggingFace folder that vLLM serves (wraps ``verl.model_merger merge``)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from trade_core.errors import TradeError
from trade_train.install import install_hint


def actor_dir(checkpoint: Path) -> Path:
    """The ``actor`` folder of a checkpoint: given directly, inside global_step_N, or the latest step of a run."""
    checkpoint = Path(checkpoint)
    for candidate in (checkpoint, checkpoint / "actor"):
        if candidate.name == "actor" and candidate.is_dir():
            return candidate
    steps = sorted(
        (p for p in checkpoint.glob("global_step_*") if (p / "actor").is_dir()),
        key=lambda p: int(re.sub(r"\D", "", p.name) or 0),
    )
    if not steps:
        raise TradeError(f"{checkpoint} holds no verl checkpoint", hint="pass a run's checkpoints/ or global_step_N")
    return steps[-1] / "actor"


def export_checkpoint(checkpoint: Path, out: Path, backend: str = "fsdp") -> Path:
    actor = actor_dir(checkpoint)
    if importlib.util.find_spec("verl") is None:
        raise TradeError("verl is not installed here", hint=install_hint("verl"))
    command = [
        sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        backend,
        "--local_dir",
        str(actor),
        "--target_dir",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise TradeError(f"verl.model_merger failed: {last}")
    return actor
