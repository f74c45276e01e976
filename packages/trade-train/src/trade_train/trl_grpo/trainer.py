"""``trl-grpo``: multi-turn GRPO on one machine (CPU or one GPU) with TRL 1.16, on the same Episode, tools,
prompts and reward schemes as ``verl-grpo``: for debugging a reward or prompt before a long cluster run.

The GRPO settings (:class:`~trade_train.trl_grpo.run.GRPOSettings`) are changed with ``KEY=VALUE`` after
``--`` (``trade train --trainer trl-grpo ... -- steps=20 num_generations=8``); the plan writes them into
``run.json`` and the command runs :mod:`trade_train.trl_grpo.run` on it.
"""

from __future__ import annotations

import importlib.util
import sys

from pydantic import ValidationError

from trade_core.errors import TradeError, error_line
from trade_train.install import install_hint
from trade_train.trainer import RunPlan, Trainer, TrainSpec
from trade_train.trl_grpo.run import CONFIG, GRPOSettings, RunConfig

ENTRY = "trade_train.trl_grpo.run"
DEVICES = ("cpu", "gpu")
SPLITS = ("train",)
"""The tasks folder's splits a run reads: it trains on train and validates on nothing (the quickstart's folder
holds train and test only)."""


def grpo_settings(overrides: tuple[str, ...], trainer: str = "trl-grpo") -> GRPOSettings:
    """The settings with the ``KEY=VALUE`` overrides applied; a malformed or unknown one is a TradeError."""
    values = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise TradeError(f"override '{override}' is not KEY=VALUE", hint="e.g. -- steps=20 num_generations=8")
        values[key.strip()] = value.strip()
    try:
        return GRPOSettings.model_validate(values)
    except ValidationError as error:
        raise TradeError(
            f"bad {trainer} setting: {error_line(error)}", hint=f"settings: {', '.join(GRPOSettings.model_fields)}"
        ) from None


class TrlGRPO(Trainer):
    name = "trl-grpo"
    description = "multi-turn GRPO with TRL 1.16 on one machine (CPU or one GPU), the same Episode and reward"
    entry = ENTRY
    """The module the planned command runs on ``run.json``."""
    devices: tuple[str, ...] = DEVICES
    needs: tuple[str, ...] = ("torch", "trl")
    extra = "trl"
    """Modules a launch imports, and the extra that installs them."""

    def preflight(self, spec: TrainSpec, *, launch: bool) -> list[TradeError]:
        """The common checks (of the train split alone), the device, the reward scheme and the settings; a launch
        adds TRL and torch."""
        from trade_reward.schemes import get_scheme
        from trade_train.preflight import spec_problems

        problems = spec_problems(spec, SPLITS)
        if spec.device not in self.devices:
            where = " or one ".join(self.devices)
            problems.append(
                TradeError(f"{self.name} trains on {where}, not {spec.device}", hint=f"pass --device {self.devices[0]}")
            )
        for check in (lambda: get_scheme(spec.reward), lambda: self.settings(spec.overrides)):
            try:
                check()
            except TradeError as error:
                problems.append(error)
        if launch:
            missing = [name for name in self.needs if importlib.util.find_spec(name) is None]
            if missing:
                problems.append(TradeError(f"{self.name} needs {' and '.join(missing)}", hint=install_hint(self.extra)))
        return problems

    def settings(self, overrides: tuple[str, ...]) -> GRPOSettings:
        """The run's GRPO settings from the ``KEY=VALUE`` overrides."""
        chosen = grpo_settings(overrides, self.name)
        if chosen.max_reply_tokens is not None:
            raise TradeError(
                "trl-grpo cannot cap a reply apart from the rollout (max_reply_tokens)",
                hint="leave max_reply_tokens out, or use --trainer prefix-grpo",
            )
        if chosen.precision != "float32":
            raise TradeError(
                "trl-grpo trains in float32 (precision)", hint="leave precision out, or use --trainer prefix-grpo"
            )
        return chosen

    def plan(self, spec: TrainSpec) -> RunPlan:
        from pathlib import Path

        from trade_reward.taskfolder import read_manifest
        from trade_train.preflight import dataset_path

        if problems := self.preflight(spec, launch=False):
            raise problems[0]
        model = str(Path(spec.model).resolve()) if Path(spec.model).is_dir() else spec.model
        config = RunConfig(
            model=model,
            tasks=spec.tasks.resolve(),
            data=dataset_path(spec, read_manifest(spec.tasks)),
            reward=spec.reward,
            device=spec.device,  # type: ignore[arg-type]  # preflight refused the others
            run_dir=spec.run_dir.resolve(),
            grpo=self.settings(spec.overrides),
        )
        return RunPlan(
            run_dir=config.run_dir,
            command=[sys.executable, "-m", self.entry, CONFIG],
            env={"TRL_EXPERIMENTAL_SILENCE": "1"},
            files={CONFIG: config.model_dump_json(indent=2) + "\n", "spec.json": spec.model_dump_json(indent=2) + "\n"},
        )

    def check(self, plan: RunPlan) -> str:
        """``run.json`` read back as the run reads it; the summary of the run."""
        config = RunConfig.model_validate_json(plan.files[CONFIG])
        g = config.grpo
        return (
            f"{self.name} on {config.device}: {g.steps} steps of {g.batch_size // g.num_generations} task(s) x "
            f"{g.num_generations} rollouts, up to {g.max_turns} replies and {g.max_completion_length} tokens each, "
            f"reward {config.reward}"
        )
