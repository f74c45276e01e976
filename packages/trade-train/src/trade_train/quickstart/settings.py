"""What one quickstart run is: the user's flags and the sizes derived from them, fixed for the run's life."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

SYNTH_SYMBOLS = 60
SYNTH_START, SYNTH_END = "2023-07-01", "2024-12-31"
"""The embedded default market: 60 synthetic stocks over 18 months (a few seconds to generate)."""


class QuickstartSettings(BaseModel):
    """The flags a run was started with; a rerun with other values is refused (``quickstart.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: Path | None = Field(None, description="a dataset folder; None: the synthetic market")
    steps: int = Field(ge=1, description="GRPO steps")
    seed: int = Field(ge=0)
    days: int = Field(ge=2, description="held-out test days evaluated and backtested")
    sft_steps: int = Field(ge=1, description="fine-tuning steps on the baseline's demonstrations")
    group: int = Field(4, ge=2, description="rollouts per GRPO task")
    temperature: float = Field(
        0.7, gt=0, description="sampling in GRPO and in evaluation: at 1.0 the tiny model's calls are mostly broken"
    )
    max_tokens: int = Field(256, ge=16, description="tokens per reply in evaluation")
    learning_rate: float = Field(
        1e-3,
        gt=0,
        description="GRPO's step size: at trl-grpo's 1e-5 a few steps move a tiny model too little to change a reply",
    )
    rollout_tokens: int = Field(
        1536, ge=64, description="tokens of a GRPO rollout, replies and tool texts together: room for a day's calls"
    )
    pool_size: str = Field("5-10", description="stocks per task (short prompts for a tiny model)")
    universe: str = "csi300"
