"""``prefix-grpo``: ``trl-grpo``'s run (the same ``run.json``, settings, Episode, reward and records) played by
:mod:`trade_train.prefix_grpo.run`, which reads each shared prompt once: the quickstart's GRPO on CPU.

It needs torch and transformers only (the ``tiny`` or ``pretrained`` extra), trains on CPU, and has no KL term and
no LoRA: a setting it cannot honour (``beta``, ``lora_rank``) is refused before the run.
"""

from __future__ import annotations

from trade_core.errors import TradeError
from trade_train.trl_grpo.run import GRPOSettings
from trade_train.trl_grpo.trainer import TrlGRPO, grpo_settings


class PrefixGRPO(TrlGRPO):
    name = "prefix-grpo"
    description = "multi-turn GRPO on CPU reading each shared prompt once (the quickstart's); the same Episode, reward"
    entry = "trade_train.prefix_grpo.run"
    devices = ("cpu",)
    needs = ("torch", "transformers")
    extra = "pretrained"

    def settings(self, overrides: tuple[str, ...]) -> GRPOSettings:
        chosen = grpo_settings(overrides, self.name)
        if chosen.beta or chosen.lora_rank:
            raise TradeError(
                f"{self.name} has no KL term and no LoRA (beta={chosen.beta}, lora_rank={chosen.lora_rank})",
                hint="leave beta and lora_rank at 0, or use --trainer trl-grpo",
            )
        return chosen
