"""``swift-lora``: LoRA SFT of a (larger) model on exported trajectories with ms-swift 4.6 (``swift sft``).

A trainer plugin of trade-train's ``trade_register_trainers`` hook, planned and launched by ``trade train`` like
``verl-grpo``. ``--dataset`` is the file of ``trade distill export``; the run folder holds ``command.sh`` and
ms-swift writes its adapters under ``RUN_DIR/output/vN-<time>/checkpoint-<step>``. The defaults are the
tutorial's; every ``swift sft`` flag after ``--`` replaces the default of the same name or is added.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from trade_core.errors import TradeError, error_line
from trade_distill.swift_check import SWIFT_INSTALL
from trade_distill.swift_models import swift_model
from trade_train.preflight import model_problems, run_dir_problems
from trade_train.trainer import RunPlan, Trainer, TrainSpec

TUTORIAL = {
    "tuner_type": ["lora"],
    "lora_rank": ["32"],
    "lora_alpha": ["64"],
    "target_modules": ["all-linear"],
    "learning_rate": ["1e-4"],
    "num_train_epochs": ["4"],
    "per_device_train_batch_size": ["1"],
    "gradient_accumulation_steps": ["4"],
    "max_length": ["20480"],
}
"""The tutorial's LoRA settings (``swift sft`` flag -> values)."""
REPORTERS = {"console": None, "swanlab": "swanlab", "tensorboard": "tensorboard", "wandb": "wandb"}
"""``--logger`` -> ``swift sft --report_to`` and the package it needs (the console is always on)."""
SWANLAB_PROJECT = "trade-agent"
OUTPUT = "output"


class Role(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool_call", "tool_response", "tool"]
    content: str


class AgentRow(BaseModel):
    """One row of ``trade distill export``: what ``swift sft`` reads (a trajectory file is refused)."""

    model_config = ConfigDict(extra="forbid")

    tools: str | list[dict] | None = None
    messages: list[Role]


def swift_executable() -> Path:
    """The ``swift`` script of this environment (where ``trade`` runs, so ms-swift sees our packages)."""
    return Path(sys.executable).with_name("swift")


def parse_flags(tokens: Sequence[str]) -> dict[str, list[str]]:
    """``--flag value ...`` (or ``--flag=value``) tokens as flag -> values, in order."""
    flags: dict[str, list[str]] = {}
    current = None
    for token in tokens:
        if token.startswith("--"):
            current, sep, value = token[2:].partition("=")
            flags[current] = [value] if sep else []
        elif current is None:
            raise TradeError(f"swift argument '{token}' follows no --flag", hint="e.g. -- --max_steps 2 --lora_rank 8")
        else:
            flags[current].append(token)
    return flags


def dataset_problems(dataset: Path | None) -> list[TradeError]:
    """The rows file exists and every line is an agent row; the first bad line is named."""
    if dataset is None:
        return [TradeError("swift-lora needs --dataset FILE", hint="write one with `trade distill export`")]
    if dataset.is_dir():
        return [
            TradeError(
                f"swift-lora trains on a rows file, not the folder {dataset}",
                hint="pass --dataset FILE from `trade distill export`",
            )
        ]
    if not dataset.is_file():
        return [TradeError(f"no dataset file {dataset}", hint="write one with `trade distill export`")]
    rows = 0
    with open(dataset, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                AgentRow.model_validate_json(line)
            except ValidationError as error:
                return [
                    TradeError(
                        f"{dataset}:{number}: not an ms-swift agent row ({error_line(error)})",
                        hint="write it with `trade distill export`",
                    )
                ]
            rows += 1
    return [] if rows else [TradeError(f"{dataset} holds no rows", hint="write it with `trade distill export`")]


class SwiftLoRA(Trainer):
    name = "swift-lora"
    description = "LoRA SFT on exported trajectories with ms-swift 4.6 (swift sft), the distillation tutorial's step"

    def preflight(self, spec: TrainSpec, *, launch: bool) -> list[TradeError]:
        """The model folder, the rows file, the run folder, the loggers, ms-swift; a launch adds the device."""
        problems = [*model_problems(spec.model), *dataset_problems(spec.dataset), *run_dir_problems(spec.run_dir)]
        if Path(spec.model).is_dir() and not problems:
            try:
                swift_model(Path(spec.model))
            except TradeError as error:
                if not {"model_type", "template", "agent_template"} <= set(parse_flags(spec.overrides)):
                    problems.append(error)
        for name in spec.logger:
            if name not in REPORTERS:
                problems.append(TradeError(f"unknown logger '{name}'", hint=f"valid: {', '.join(REPORTERS)}"))
            elif REPORTERS[name] and importlib.util.find_spec(REPORTERS[name]) is None:
                problems.append(TradeError(f"--logger {name} needs {name}", hint=f"pip install {REPORTERS[name]}"))
        try:
            parse_flags(spec.overrides)
        except TradeError as error:
            problems.append(error)
        if not swift_executable().is_file() or importlib.util.find_spec("swift") is None:
            problems.append(TradeError("swift-lora needs ms-swift in this environment", hint=SWIFT_INSTALL))
        if launch:
            problems += device_problems(spec.device)
        return problems

    def plan(self, spec: TrainSpec) -> RunPlan:
        if problems := self.preflight(spec, launch=False):
            raise problems[0]
        run_dir = spec.run_dir.resolve()
        model = Path(spec.model)
        flags: dict[str, list[str]] = {"model": [str(model.resolve()) if model.is_dir() else spec.model]}
        if model.is_dir():
            with contextlib.suppress(TradeError):  # preflight let it through: the user's flags name all three
                names = swift_model(model)
                flags.update(
                    model_type=[names.model_type], template=[names.template], agent_template=[names.agent_template]
                )
        flags["dataset"] = [str(spec.dataset.resolve())]
        flags.update(TUTORIAL)
        cpu = spec.device == "cpu"  # bf16 on a CPU fails in swift sft ("doesn't support bf16/gpu")
        flags.update({"use_cpu": ["true"], "torch_dtype": ["float32"]} if cpu else {"torch_dtype": ["bfloat16"]})
        reporters = [name for name in spec.logger if REPORTERS[name]]
        flags["report_to"] = reporters or ["none"]
        if "swanlab" in reporters:
            flags["swanlab_project"] = [SWANLAB_PROJECT]
        flags["output_dir"] = [str(run_dir / OUTPUT)]
        flags.update(parse_flags(spec.overrides))
        argv = [token for flag, values in flags.items() for token in (f"--{flag}", *values)]
        spec_json = spec.model_dump_json(indent=2) + "\n"
        return RunPlan(
            run_dir=run_dir, command=[str(swift_executable()), "sft", *argv], env={}, files={"spec.json": spec_json}
        )

    def check(self, plan: RunPlan) -> str:
        """Every flag is one of ``swift sft``'s (ms-swift's own argument class): a typo fails here, not in the run."""
        import dataclasses

        from swift.arguments import SftArguments

        known = {field.name for field in dataclasses.fields(SftArguments)}
        flags = parse_flags(plan.command[2:])
        unknown = [flag for flag in flags if flag not in known]
        if unknown:
            raise TradeError(f"swift sft has no flag --{unknown[0]}", hint="see `swift sft --help`")
        with open(flags["dataset"][0], encoding="utf-8") as handle:
            rows = sum(1 for line in handle if line.strip())
        value = {flag: " ".join(values) for flag, values in flags.items()}
        return (
            f"swift-lora: {rows} rows, LoRA rank {value['lora_rank']} alpha {value['lora_alpha']} on "
            f"{value['target_modules']}, {value['num_train_epochs']} epochs, lr {value['learning_rate']}, "
            f"max length {value['max_length']} -> {value['output_dir']}"
        )


def device_problems(device: str) -> list[TradeError]:
    """The device's torch is there: Ascend needs torch_npu, a GPU a CUDA build that sees one."""
    if device == "npu" and importlib.util.find_spec("torch_npu") is None:
        return [TradeError("--device npu needs torch_npu", hint="install torch-npu, or pass --device cpu or gpu")]
    if device == "gpu":
        import torch

        if not torch.cuda.is_available():
            return [TradeError("--device gpu: torch sees no GPU here", hint="pass --device cpu (no bf16, slow)")]
    return []
