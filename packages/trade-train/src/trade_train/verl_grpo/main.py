"""``python -m trade_train.verl_grpo.main OVERRIDE...``: verl's ``main_ppo`` with the trading metrics installed.

The same Hydra config, validation and Ray launch as ``python -m verl.trainer.main_ppo``; only the TaskRunner
differs (:class:`~trade_train.verl_grpo.verl_trainer.TradeTaskRunner`). ``trade train`` writes this command.
"""

from __future__ import annotations

from pathlib import Path

import hydra
import verl
from omegaconf import DictConfig
from verl.trainer.main_ppo import run_ppo
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.device import auto_set_device

from trade_core.errors import TradeError
from trade_train.verl_grpo.verl_trainer import TradeTaskRunner

CONFIG_DIR = str(Path(verl.__file__).parent / "trainer" / "config")


@hydra.main(config_path=CONFIG_DIR, config_name="ppo_trainer", version_base=None)
def main(config: DictConfig) -> None:
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if not config.trainer.use_v1:
        raise TradeError("the trading metrics need verl's V1 trainer", hint="drop trainer.use_v1=False")
    run_ppo(config, task_runner_class=TradeTaskRunner)


if __name__ == "__main__":
    main()
