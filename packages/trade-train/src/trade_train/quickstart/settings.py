"""What one quickstart run is: the user's flags and the sizes derived from them, fixed for the run's life.

The defaults are chosen from measurements on the planted-signal market (packages/trade-train/README.md,
"What the defaults are and why"): each is a ``trade quickstart`` flag of the same name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SYNTH_START, SYNTH_END = "2023-07-01", "2024-12-31"
"""The embedded market's 18 months (a few seconds to generate)."""
NO_SIGNAL = "none"


class QuickstartSettings(BaseModel):
    """The flags a run was started with; a rerun with other values is refused (``quickstart.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: Path | None = Field(None, description="a dataset folder; None: the synthetic market")
    signal: str = Field(
        "KMID:0.3",
        description="the edge planted in the synthetic market (NAME:IC, or 'none'); with --data, the data's own",
    )
    symbols: int = Field(
        16, ge=10, description="stocks of the synthetic market: its csi300 holds half, the pool every day draws from"
    )
    steps: int = Field(12, ge=1, description="GRPO steps")
    seed: int = Field(
        0, ge=0, description="seed of the market, tasks, weights and sampling: the same seed, the same numbers"
    )
    days: int = Field(20, ge=2, description="held-out test days evaluated and backtested")
    samples: int = Field(4, ge=1, description="samples of each held-out task per model")
    sft_steps: int = Field(600, ge=1, description="fine-tuning steps on the demonstrations")
    demonstrations: int = Field(189, ge=1, description="training days played as demonstrations for the fine-tune")
    group: int = Field(8, ge=2, description="rollouts per GRPO task")
    tasks_per_step: int = Field(2, ge=1, description="GRPO tasks (groups) per step")
    temperature: float = Field(
        0.7, gt=0, description="sampling in GRPO and in evaluation: at 1.0 the tiny model's calls are mostly broken"
    )
    max_tokens: int = Field(256, ge=16, description="tokens per reply in evaluation")
    learning_rate: float = Field(1e-3, gt=0, description="GRPO's step size, constant over the run")
    rollout_tokens: int = Field(
        1536, ge=64, description="tokens of a GRPO rollout, replies and tool texts together: room for a day's calls"
    )
    reward: str = Field("continuous", description="reward scheme of GRPO and of the held-out evaluation")
    tools: str = Field(
        "compute_alpha_factor,TakeAction",
        description="the tools a day offers (the full four: get_price_data,get_macro_indicators,compute_alpha_factor,"
        "TakeAction)",
    )
    prompt_set: str = Field("compact", description="how a day is put into words (the tutorial's: default)")
    pool_size: str = Field(
        "8", description="stocks per task: with 16 stocks the same 8 most days, so a tiny model names them right"
    )
    universe: str = Field("csi300", description="universe the task pools are drawn from")
    device: Literal["cpu", "gpu"] = Field(
        "cpu", description="where GRPO and the evaluated models run (the fine-tune: CPU)"
    )
    model_layers: int = Field(2, ge=1, description="layers of the random-init Qwen3")
    model_hidden: int = Field(64, ge=32, description="hidden size of the random-init Qwen3")

    @property
    def planted(self) -> str | None:
        """The ``NAME:IC`` planted in the synthetic market, or None."""
        return None if self.data is not None or self.signal == NO_SIGNAL else self.signal
