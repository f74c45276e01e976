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
from types import UnionType
from typing import TYPE_CHECKING, Union, get_args, get_origin, get_type_hints

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


ACCEPTS: dict[type, tuple[type, ...]] = {bool: (bool,), int: (int,), float: (int, float)}
NAMES = {bool: "a bool", int: "an int", float: "a number"}


def _declared_type(config: DictConfig, defaults: DictConfig, key: str) -> type | None:
    """The type verl declares for ``key``: the field's annotation in the config dataclass its section names
    (``_target_``), else its YAML default's type, where an int default may also hold a float (``top_p: 1``)."""
    from hydra.utils import get_class
    from omegaconf import DictConfig, OmegaConf

    section, _, name = key.rpartition(".")
    parent = OmegaConf.select(config, section, throw_on_resolution_failure=False) if section else config
    if isinstance(parent, DictConfig) and "_target_" in parent:
        hints = get_type_hints(get_class(parent._target_))
        if name in hints:
            if get_origin(hints[name]) not in (Union, UnionType):
                return hints[name]
            declared = [t for t in get_args(hints[name]) if t is not type(None)]
            return declared[0] if len(declared) == 1 else None  # Optional[int] -> int
    default = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
    return float if type(default) is int else type(default)


def check_types(config: DictConfig, defaults: DictConfig, overrides: list[str]) -> None:
    """Each override has the type verl declares (see :func:`_declared_type`); null is always allowed.

    Without this ``rollout.n=abc`` reaches verl's batch-size arithmetic and fails as
    ``TypeError: not all arguments converted during string formatting``.
    """
    from omegaconf import OmegaConf

    last = {key: text for key, _, text in (override.partition("=") for override in overrides)}
    for key, text in last.items():
        expected = _declared_type(config, defaults, key)
        value = OmegaConf.select(config, key, throw_on_resolution_failure=False)
        if expected not in ACCEPTS or value is None:
            continue
        if isinstance(value, bool) != (expected is bool) or not isinstance(value, ACCEPTS[expected]):
            default = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
            raise TypeError(f"{key}={text}: expected {NAMES[expected]} (verl's default: {default})")


def compose(overrides: list[str]) -> dict[str, object]:
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = hydra_compose(config_name="ppo_trainer", overrides=overrides)
        defaults = hydra_compose(config_name="ppo_trainer")
    OmegaConf.resolve(config)
    check_types(config, defaults, overrides)
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
