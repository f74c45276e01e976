"""What one quickstart run is: the user's flags and the sizes derived from them, fixed for the run's life.

The defaults are chosen from measurements on the planted-signal market (packages/trade-train/README.md, "A pretrained
model on two cores" and "What the tiny model's defaults are and why"): each is a ``trade quickstart`` flag of the
same name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trade_core.cpu_generation import Precision

SYNTH_START, SYNTH_END = "2023-07-01", "2024-12-31"
"""The embedded market's 18 months (a few seconds to generate)."""
NO_SIGNAL = "none"
EDGE = "KMID:0.3"
"""The edge a realistic daily factor has (rank IC 0.3): the tiny model's default; a stronger one is a sanity check."""
TINY = "tiny"
"""``--model tiny``: the random-init Qwen3 of ``trade model tiny`` (smoke runs and tests; it cannot read a ranking)."""


class Recipe(BaseModel):
    """The settings that differ between the tiny random model and a pretrained one (each a flag that overrides it)."""

    model_config = ConfigDict(frozen=True)

    signal: str
    """The edge planted in the synthetic market: a pretrained model's default is a strong one, so that learning shows
    within a short run on two cores (the report says so in its first line)."""
    symbols: int
    """Stocks of the synthetic market. The tiny model cannot copy a code from its context, so its pool is the same 8
    stocks every day (16: csi300 holds 8); a model that can copy gets pools drawn from 30, so that what GRPO rewards
    is reading the ranking, not a stock's name."""
    days: int
    backtest_days: int
    """The held-out days the backtest plays, from the first: a backtest day waits for the one before (its portfolio
    carries over), so its replies are generated one at a time, not in batches as the held-out tasks are."""
    sft_steps: int
    """A pretrained model's 20 steps taught seed 0 to copy the ranking's codes but left seed 1 ordering a code not
    in the pool in a third of its GRPO rollouts, which GRPO then could not learn past (docs/benchmarks.md, "Seed 1:
    the copy the fine-tune leaves"); 30 brought that to 9 of 192."""
    sft_batch: int
    sft_learning_rate: float
    learning_rate: float
    train_layers: int
    prompt_set: str
    trainer: str
    stop_with_orders: bool
    """The demonstrations' buy and stop are one reply (a day of two replies), not two."""
    walks_ranking: bool
    """The demonstrations' buy copies the ranking from its top line down to the stock it buys first: a model that can
    copy then chooses where to stop, the same decision every day, rather than a code that differs by day."""
    rollout_tokens: int
    max_tokens: int
    """A reply's tokens in evaluation and prefix-grpo's rollouts: a batch of replies decodes until its longest ends."""
    precision: Precision
    """How the fine-tune, GRPO and the evaluated models compute on CPU (auto: bfloat16 where the CPU has it)."""
    eval_batch: int
    """Replies the evaluated models generate together (``--set batch``): on CPU a pretrained base's decode step
    costs its weights' reading whatever the rows, so more rows a step is more tokens a second (docs/benchmarks.md,
    "Prompt cache")."""


RECIPES = {
    "tiny": Recipe(
        signal=EDGE,
        symbols=16,
        days=20,
        backtest_days=20,
        sft_steps=600,
        sft_batch=1,
        sft_learning_rate=1e-2,
        learning_rate=1e-3,
        train_layers=0,
        prompt_set="compact",
        trainer="trl-grpo",
        stop_with_orders=False,
        walks_ranking=False,
        rollout_tokens=1536,
        max_tokens=256,
        precision="float32",
        eval_batch=16,
    ),
    "pretrained": Recipe(
        signal="KMID:0.9",
        symbols=60,
        days=40,
        backtest_days=10,
        sft_steps=30,
        sft_batch=8,
        sft_learning_rate=5e-4,
        learning_rate=1e-5,
        train_layers=0,
        prompt_set="compact-en",
        trainer="prefix-grpo",
        stop_with_orders=True,
        walks_ranking=True,
        rollout_tokens=640,
        max_tokens=192,
        precision="auto",
        eval_batch=32,
    ),
}
"""Per kind of model: the tiny one learns the format from scratch one demonstration a step at a high rate and
trains every weight, on the Chinese prompts its Qwen3 tokenizer reads compactly; a pretrained one needs a few
batched steps and a small GRPO rate, walks the ranking down to its buy and trains every layer (with its top 8
only, it bought the first line it had copied wherever its walk stopped), and reads English (SmolLM2 spends a
token per Chinese character); its prompts are long for its speed on CPU, so its GRPO reads each shared prompt
once (prefix-grpo) and its days are two replies (the buy and the stop in one)."""
TRAINERS = ("trl-grpo", "prefix-grpo")


def _defaults(field: str) -> str:
    """A recipe field's default per kind of model, for a flag's help (read from RECIPES, so it cannot go stale)."""
    tiny, pretrained = (getattr(RECIPES[kind], field) for kind in ("tiny", "pretrained"))
    return f"{tiny:g} for tiny, {pretrained:g} for a pretrained model"


class QuickstartSettings(BaseModel):
    """The flags a run was started with; a rerun with other values is refused (``quickstart.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    data: Path | None = Field(None, description="a dataset folder; None: the synthetic market")
    model: str = Field(
        "smollm2",
        description="the model: smollm2 (a pretrained base built offline, `trade model smollm2`: the one that learns "
        "here), tiny (the random-init Qwen3 of `trade model tiny`, for smoke runs) or a local Hugging Face causal-LM "
        "folder",
    )
    signal: str | None = Field(
        None,
        description=f"the edge planted in the synthetic market (NAME:IC, or 'none'; tiny {EDGE}, a pretrained model "
        "KMID:0.9, a sanity check with a strong edge); with --data, the data's own",
    )
    symbols: int | None = Field(
        None,
        ge=10,
        description="stocks of the synthetic market: its csi300 holds half, the pool every day draws from (tiny 16, "
        "pretrained 60)",
    )
    steps: int = Field(12, ge=1, description="GRPO steps")
    seed: int = Field(
        0, ge=0, description="seed of the market, tasks, weights and sampling: the same seed, the same numbers"
    )
    days: int | None = Field(None, ge=2, description="held-out test days evaluated (tiny 20, a pretrained model 40)")
    backtest_days: int | None = Field(
        None,
        ge=2,
        description="held-out days backtested, from the first, at most --days (tiny 20, a pretrained model 10: a "
        "backtest day's replies wait for the day before)",
    )
    samples: int = Field(4, ge=1, description="samples of each held-out task per model")
    sft_steps: int | None = Field(
        None, ge=1, description=f"fine-tuning steps on the demonstrations ({_defaults('sft_steps')})"
    )
    sft_batch: int | None = Field(
        None, ge=1, description=f"demonstrations per fine-tuning step ({_defaults('sft_batch')})"
    )
    sft_learning_rate: float | None = Field(
        None, gt=0, description=f"the fine-tune's peak step size ({_defaults('sft_learning_rate')})"
    )
    demonstrations: int = Field(189, ge=1, description="training days played as demonstrations for the fine-tune")
    group: int = Field(8, ge=2, description="rollouts per GRPO task")
    tasks_per_step: int = Field(2, ge=1, description="GRPO tasks (groups) per step")
    temperature: float = Field(
        0.7, gt=0, description="sampling in GRPO and in evaluation: at 1.0 the tiny model's calls are mostly broken"
    )
    max_tokens: int | None = Field(
        None,
        ge=16,
        description="tokens per reply in evaluation and in prefix-grpo's rollouts (tiny 256; pretrained 192: its "
        "longest walk, buy and stop is about 185)",
    )
    learning_rate: float | None = Field(
        None, gt=0, description=f"GRPO's step size, constant over the run ({_defaults('learning_rate')})"
    )
    train_layers: int | None = Field(
        None,
        ge=0,
        description="decoder layers GRPO and a pretrained model's fine-tune train, from the top (0: all; tiny and "
        "pretrained 0)",
    )
    rollout_tokens: int | None = Field(
        None,
        ge=64,
        description="tokens of a GRPO rollout, replies and tool texts together (tiny 1536; pretrained 640, a "
        "two-reply day is ~370-450): a day that rambles is cut there",
    )
    precision: Precision | None = Field(
        None,
        description="how the model computes on CPU: auto is bfloat16 where the CPU multiplies it in hardware "
        "(AVX512-BF16, AMX, Arm BF16), else float32; weights and updates stay float32 in training, and trl-grpo "
        "trains in float32 (tiny float32, pretrained auto)",
    )
    reward: str = Field("continuous", description="reward scheme of GRPO and of the held-out evaluation")
    trainer: Literal["trl-grpo", "prefix-grpo"] | None = Field(
        None,
        description="GRPO's trainer: trl-grpo (TRL 1.16) or prefix-grpo (reads each shared prompt once; no KL, no "
        "LoRA); tiny trl-grpo, pretrained prefix-grpo",
    )
    tools: str = Field(
        "compute_alpha_factor,TakeAction",
        description="the tools a day offers (the full four: get_price_data,get_macro_indicators,compute_alpha_factor,"
        "TakeAction)",
    )
    prompt_set: str | None = Field(
        None,
        description="how a day is put into words: compact (Chinese; tiny's), compact-en (English; a pretrained "
        "model's), default (the tutorial's)",
    )
    pool_size: str = Field(
        "8", description="stocks per task: with 16 stocks the same 8 most days, so a tiny model names them right"
    )
    universe: str = Field("csi300", description="universe the task pools are drawn from")
    device: Literal["cpu", "gpu"] = Field(
        "cpu", description="where GRPO and the evaluated models run (the fine-tune: CPU)"
    )
    model_layers: int = Field(2, ge=1, description="layers of the random-init Qwen3 (--model tiny)")
    model_hidden: int = Field(64, ge=32, description="hidden size of the random-init Qwen3 (--model tiny)")

    @field_validator("signal")
    @classmethod
    def _plantable(cls, signal: str | None) -> str | None:
        from trade_data.signals import PlantedSignal

        if signal is not None and signal != NO_SIGNAL:
            PlantedSignal.parse(signal)  # its one-line error before anything runs
        return signal

    @field_validator("model")
    @classmethod
    def _known_or_folder(cls, model: str) -> str:
        from trade_train.pretrained import BASES

        if model == TINY or model in BASES:
            return model
        folder = Path(model).expanduser()
        if not (folder / "config.json").is_file():
            known = ", ".join([TINY, *BASES])
            raise ValueError(f"{model!r} is neither {known} nor a model folder with a config.json")
        return str(folder.resolve())

    @model_validator(mode="after")
    def _trainer_computes_so(self) -> QuickstartSettings:
        if self.recipe.trainer == "trl-grpo" and self.recipe.precision == "bfloat16":
            raise ValueError("--precision bfloat16 needs --trainer prefix-grpo (trl-grpo trains in float32)")
        return self

    @property
    def tiny(self) -> bool:
        return self.model == TINY

    @property
    def recipe(self) -> Recipe:
        """The recipe of this kind of model, with the flags given over it."""
        chosen = RECIPES["tiny" if self.tiny else "pretrained"]
        flags = Recipe.model_fields.keys() & type(self).model_fields.keys()
        given = {k: getattr(self, k) for k in flags if getattr(self, k) is not None}
        return chosen.model_copy(update=given)

    @property
    def planted(self) -> str | None:
        """The ``NAME:IC`` planted in the synthetic market, or None."""
        signal = self.recipe.signal
        return None if self.data is not None or signal == NO_SIGNAL else signal
