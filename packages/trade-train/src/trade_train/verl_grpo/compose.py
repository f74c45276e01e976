"""Compose and validate a verl 0.9.1 GRPO config exactly as ``verl.trainer.main_ppo`` would, without launching.

Run as ``python -m trade_train.verl_grpo.compose OVERRIDE...`` in the environment that has verl (the
dry run uses a subprocess so Hydra's global state and verl's heavy imports stay out of the CLI).
Prints a JSON summary of the composed config, or one line ``error: ...`` and exits 2.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from omegaconf import DictConfig


def _importable(target: str) -> None:
    module, _, name = target.rpartition(".")
    getattr(importlib.import_module(module), name)


def validate(config: DictConfig) -> None:
    """verl's own ``validate_config``, and what our entry point needs on top: the V1 trainer."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if not config.trainer.use_v1:
        raise ValueError("the trading metrics need verl's V1 trainer: drop trainer.use_v1=False")


def compose(overrides: list[str]) -> dict[str, object]:
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = hydra_compose(config_name="ppo_trainer", overrides=overrides)
    OmegaConf.resolve(config)
    validate(config)
    _importable("trade_train.verl_grpo.main.main")  # the entry point and all it needs (ray, TransferQueue)
    rollout = config.actor_rollout_ref.rollout
    for entry in yaml.safe_load(Path(rollout.multi_turn.tool_config_path).read_text())["tools"]:
        _importable(entry["class_name"])
    for entry in yaml.safe_load(Path(rollout.agent.agent_loop_config_path).read_text()):
        _importable(entry["_target_"])
    if not Path(config.reward.custom_reward_function.path).is_file():
        raise FileNotFoundError(f"reward function file {config.reward.custom_reward_function.path}")
    return {
        "algorithm": config.algorithm.adv_estimator,
        "model": config.actor_rollout_ref.model.path,
        "device": config.trainer.device,
        "gpus": config.trainer.n_gpus_per_node * config.trainer.nnodes,
        "rollout": f"{rollout.name} n={rollout.n} format={rollout.multi_turn.format}",
        "agent_loop": rollout.agent.default_agent_loop,
        "reward": f"{config.reward.custom_reward_function.path}:{config.reward.custom_reward_function.name}",
        "train_files": config.data.train_files,
    }


def main(argv: list[str] | None = None) -> None:
    try:
        summary = compose(list(sys.argv[1:] if argv is None else argv))
    except Exception as error:  # Hydra, OmegaConf and verl's asserts all mean "this config is wrong"
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"error: verl rejects the config: {type(error).__name__}: {message}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
