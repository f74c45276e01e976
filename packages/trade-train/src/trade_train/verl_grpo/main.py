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
from verl.utils.device import auto_set_device

from trade_train.verl_grpo.compose import validate
from trade_train.verl_grpo.verl_trainer import TradeTaskRunner

CONFIG_DIR = str(Path(verl.__file__).parent / "trainer" / "config")


@hydra.main(config_path=CONFIG_DIR, config_name="ppo_trainer", version_base=None)
def main(config: DictConfig) -> None:
    auto_set_device(config)
    validate(config)
    run_ppo(config, task_runner_class=TradeTaskRunner)


if __name__ == "__main__":
    main()
