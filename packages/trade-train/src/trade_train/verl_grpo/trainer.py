"""``verl-grpo``: GRPO with verl 0.9.1 on Ray, the tutorial's run by default.

Defaults are sized for the tutorial: a 4B Qwen model on one node of 8 cards, 8 rollouts per task,
KL loss, trajectory dumps and checkpoints in the run folder. Presets add what each device needs
(Ascend NPU: HCCL timeout, Ray device visibility, no torch.compile, no chunked prefill, FSDP offload;
GPU: vLLM rollout memory). Anything can be overridden with Hydra overrides after ``--``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from trade_core.errors import TradeError
from trade_records.runfolder import ROLLOUTS
from trade_tools.episode import MAX_TURNS, TOOL_TEXT_LIMIT
from trade_tools.toolcalls import HERMES, QWEN3_CODER, model_format
from trade_train.install import install_hint
from trade_train.trainer import RunPlan, Trainer, TrainSpec

PRESETS: dict[str, tuple[dict[str, str], list[str]]] = {
    "npu": (
        {"HCCL_CONNECT_TIMEOUT": "1500", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1"},
        [
            "trainer.device=npu",
            "actor_rollout_ref.actor.use_torch_compile=False",
            "actor_rollout_ref.rollout.enable_chunked_prefill=False",
            "actor_rollout_ref.actor.fsdp_config.param_offload=True",
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
            "actor_rollout_ref.ref.fsdp_config.param_offload=True",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        ],
    ),
    "gpu": ({}, ["trainer.device=cuda", "actor_rollout_ref.rollout.gpu_memory_utilization=0.6"]),
}


LOGGERS = {
    "console": None,
    "file": None,
    "swanlab": "swanlab",
    "wandb": "wandb",
    "vemlp_wandb": "wandb",
    "mlflow": "mlflow",
    "tensorboard": "tensorboard",
    "clearml": "clearml",
    "trackio": "trackio",
}
"""verl 0.9.1's ``trainer.logger`` backends and the module each imports when the run starts."""


def logger_problems(loggers: tuple[str, ...]) -> list[TradeError]:
    """Unknown and uninstalled loggers, found now rather than after Ray and the model have started."""
    problems = []
    for name in loggers:
        if name not in LOGGERS:
            problems.append(TradeError(f"unknown logger '{name}'", hint=f"valid: {', '.join(LOGGERS)}"))
        elif (module := LOGGERS[name]) and importlib.util.find_spec(module) is None:
            problems.append(TradeError(f"--logger {name} needs the {module} package", hint=f"pip install {module}"))
    return problems


def verl_device(spec: TrainSpec) -> str:
    """verl's ``trainer.device`` for the run: the preset's, unless an override sets it (``cpu`` for development)."""
    settings = [*PRESETS[spec.device][1], *spec.overrides]
    return [s.partition("=")[2] for s in settings if s.lstrip("+").startswith("trainer.device=")][-1]


def model_path(model: str) -> str:
    """The model folder made absolute (verl runs in the run folder), or the hub id as given."""
    return str(Path(model).resolve()) if Path(model).is_dir() else model


def tool_format(model: str) -> str:
    """verl's tool-call parser for the model (:func:`trade_tools.toolcalls.model_format`; an unknown family is an
    error): hermes (Qwen3 JSON) or qwen3_coder (Qwen3.5 XML); a hub name, by its name."""
    if (Path(model) / "config.json").is_file():
        return model_format(Path(model)).tool_calls
    return QWEN3_CODER if "qwen3.5" in model.lower() or "qwen3_5" in model.lower() else HERMES


ENTRY = "trade_train.verl_grpo.main"
"""The module ``trade train`` runs: verl's ``main_ppo`` with the trading metrics."""


def _tasks(spec: TrainSpec) -> tuple[dict[str, bytes], str]:
    """verl's parquet file of each split in ``SPLITS``, and its tool config (the dataset the tools read, the
    schemas anonymized with the tasks, the tools they offer). verl's tool config is one file for every row, so
    every task must agree with the manifest on ``anonymized`` and ``tools``."""
    from trade_reward.taskfolder import read_manifest, read_records
    from trade_train.preflight import SPLITS, dataset_path
    from trade_train.verl_grpo.files import tools_yaml
    from trade_train.verl_grpo.schema import parquet

    manifest = read_manifest(spec.tasks)
    records = {split: read_records(spec.tasks, split) for split in SPLITS}
    for field in ("anonymized", "tools"):
        if any(getattr(r.task, field) != getattr(manifest, field) for split in records.values() for r in split):
            raise TradeError(
                f"tasks folder {spec.tasks}: some tasks disagree with its manifest on {field}",
                hint="rebuild it with `trade data tasks`",
            )
    rows = {f"{split}.parquet": parquet(split_records) for split, split_records in records.items()}
    return rows, tools_yaml(dataset_path(spec, manifest), manifest.tools, anonymized=manifest.anonymized)


def hydra_overrides(command: list[str]) -> list[str]:
    """The Hydra overrides of a planned command: everything after ``-m ENTRY``."""
    return command[command.index(ENTRY) + 1 :]


class VerlGRPO(Trainer):
    name = "verl-grpo"
    description = "GRPO with verl 0.9.1 on Ray (vLLM or vLLM-Ascend rollout), the trading agent loop and our reward"

    def preflight(self, spec: TrainSpec, *, launch: bool) -> list[TradeError]:
        """The common checks, the reward scheme and the loggers; a launch adds the device's stack (see ``stack``)."""
        from trade_reward.schemes import get_scheme
        from trade_train.verl_grpo.stack import stack_problems

        problems = super().preflight(spec, launch=launch)
        if spec.device not in PRESETS:
            return [
                *problems,
                TradeError(f"verl-grpo trains on npu or gpu, not {spec.device}", hint="use --trainer trl-grpo on cpu"),
            ]
        try:
            get_scheme(spec.reward)
        except TradeError as error:
            problems.append(error)
        problems += logger_problems(spec.logger)
        return problems + stack_problems(verl_device(spec)) if launch else problems

    def plan(self, spec: TrainSpec) -> RunPlan:
        from trade_train.verl_grpo import schema
        from trade_train.verl_grpo.files import agent_loops_yaml

        if problems := self.preflight(spec, launch=False):
            raise problems[0]
        rows, tools = _tasks(spec)
        model = model_path(spec.model)
        run_dir = spec.run_dir.resolve()
        env, preset = PRESETS[spec.device]
        loggers = ",".join(f'"{name}"' for name in spec.logger)
        overrides = [
            "algorithm.adv_estimator=grpo",
            f"data.train_files={run_dir / 'train.parquet'}",
            f"data.val_files={run_dir / 'val.parquet'}",
            "data.train_batch_size=32",
            "data.max_prompt_length=4096",
            "data.max_response_length=8192",
            f"actor_rollout_ref.model.path={model}",
            "actor_rollout_ref.actor.optim.lr=1e-6",
            "actor_rollout_ref.actor.ppo_mini_batch_size=16",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.actor.use_kl_loss=True",
            "actor_rollout_ref.actor.kl_loss_coef=0.001",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.n=8",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            f"actor_rollout_ref.rollout.multi_turn.format={spec.tool_format or tool_format(spec.model)}",
            f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={MAX_TURNS}",
            f"actor_rollout_ref.rollout.multi_turn.max_tool_response_length={TOOL_TEXT_LIMIT}",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={run_dir / 'tools.yaml'}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={run_dir / 'agent_loops.yaml'}",
            f"actor_rollout_ref.rollout.agent.default_agent_loop={schema.AGENT_NAME}",
            f"reward.custom_reward_function.path={Path(schema.__file__).resolve()}",
            "reward.custom_reward_function.name=compute_score",
            f"+reward.custom_reward_function.reward_kwargs.scheme={spec.reward}",
            f"trainer.n_gpus_per_node={spec.gpus_per_node}",
            f"trainer.nnodes={spec.nodes}",
            f"trainer.logger=[{loggers}]",
            "trainer.project_name=trade-agent",
            f"trainer.experiment_name={run_dir.name}",
            "trainer.total_epochs=1",
            "trainer.save_freq=50",
            "trainer.test_freq=25",
            f"trainer.rollout_data_dir={run_dir / ROLLOUTS}",
            f"trainer.default_local_dir={run_dir / 'checkpoints'}",
            *preset,
            *spec.overrides,
        ]
        return RunPlan(
            run_dir=run_dir,
            command=[sys.executable, "-m", ENTRY, *overrides],
            env=dict(env),
            files={
                **rows,
                "tools.yaml": tools,
                "agent_loops.yaml": agent_loops_yaml(),
                "spec.json": spec.model_dump_json(indent=2) + "\n",
            },
        )

    def check(self, plan: RunPlan) -> str:
        if importlib.util.find_spec("verl") is None:
            raise TradeError(
                "verl is not installed here, so the config cannot be validated",
                hint=install_hint("verl"),
            )
        overrides = hydra_overrides(plan.command)
        done = subprocess.run(
            [sys.executable, "-m", "trade_train.verl_grpo.compose", *overrides],
            capture_output=True,
            text=True,
            cwd=plan.run_dir,
            check=False,
        )
        if done.returncode != 0:
            lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
            raise TradeError(lines[-1].removeprefix("error: "))
        return done.stdout
