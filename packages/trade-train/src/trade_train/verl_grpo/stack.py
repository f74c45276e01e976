"""What a real launch needs installed for its device (verl's ``trainer.device``), checked before Ray starts.

Finding a module (``importlib.util.find_spec``) costs milliseconds and imports nothing, so every missing one is
reported at once, one line per fix. Importing is slow (torch ~2 s, verl ~9 s, vLLM more), so the imports are
tried only once the whole stack is found, and only the device's torch: that catches what finding cannot, a
torch-npu that does not load (CANN's environment not sourced) or a CPU build of torch under vLLM.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys

from trade_core.errors import TradeError
from trade_train.install import CPU_TORCH, install_hint

STACKS = {
    "npu": ("torch", "torch_npu", "vllm", "vllm_ascend", "verl"),
    "cuda": ("torch", "vllm", "verl"),
    "cpu": ("torch", "verl"),
}
"""The modules a run on each device imports; ``cpu`` (a development run, ``-- trainer.device=cpu``) stops short
of the rollout, so it needs no vLLM."""
GPU = "pip install 'trade-train[gpu]'"
ASCEND_GUIDE = "vllm-ascend's installation guide says"
PROBES = {
    "npu": (
        "import torch, torch_npu",
        "source CANN's set_env.sh first (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh); torch-npu must match torch",
    ),
    "cuda": (
        "import torch; assert torch.version.cuda, f'torch {torch.__version__} is not a CUDA build'",
        f"install vLLM's CUDA torch: {GPU} in a fresh venv",
    ),
    "cpu": ("import torch", f"reinstall it: {CPU_TORCH} --force-reinstall"),
}
"""Per device: the import that must work, and the fix when it does not."""


def _fix(device: str, module: str, missing: list[str]) -> str:
    """How to install ``module`` here: one extra where torch is missing too, else without touching torch."""
    if device == "npu" and module.startswith("vllm"):
        return f"install them as {ASCEND_GUIDE}: they build against CANN"
    if device == "cuda" and ("torch" in missing or "vllm" in missing):
        return GPU  # vLLM brings the CUDA torch it was built for
    if device == "npu" and "torch" in missing:
        return "pip install 'trade-train[npu]'"
    if module == "torch_npu":
        torch = importlib.metadata.version("torch")
        return f"install the torch-npu build for torch {torch} and your CANN, as {ASCEND_GUIDE}"
    return install_hint("verl")  # the CPU wheel first where torch is missing


def stack_problems(device: str) -> list[TradeError]:
    """What a run on ``device`` cannot import here: one line per fix, then (all found) the device's torch probed."""
    stack = STACKS.get(device, STACKS["cpu"])
    missing = [module for module in stack if importlib.util.find_spec(module) is None]
    if not missing:
        return probe_problems(device)
    fixes: dict[str, list[str]] = {}
    for module in missing:
        fixes.setdefault(_fix(device, module, missing), []).append(module)
    return [
        TradeError(f"training on {device.upper()} needs {', '.join(modules)}, not installed here", hint=fix)
        for fix, modules in fixes.items()
    ]


def probe_problems(device: str) -> list[TradeError]:
    """Import the device's torch in a fresh process (a broken install may crash or print); why it fails, if it does."""
    code, fix = PROBES.get(device, PROBES["cpu"])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return []
    last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return [TradeError(f"torch cannot train on {device.upper()}: {last.partition(': ')[2] or last}", hint=fix)]
