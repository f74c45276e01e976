"""``python -m trade_train.trl_grpo.run run.json``: the trl-grpo run the trainer planned, in this process.

TRL's ``GRPOTrainer`` generates each group's rollouts with the model itself (no inference server), plays every
rollout's day through a :class:`~trade_train.trl_grpo.environment.TradingEnvironment`, scores it with the reward
scheme and steps. Each step then leaves what a verl step leaves: the ``trade/...`` metrics (in TRL's log,
``metrics.jsonl`` and the console) and the step's Trajectory records in ``rollouts/trajectories/{step}.jsonl``.

Private API of TRL 1.16 this relies on (pin ``trl>=1.16,<1.17``; re-check when moving):
``GRPOTrainer._env_tools`` (the tool schemas rendered into each prompt), ``_sync_tool_dicts`` (the
per-rollout ``{name: method}`` the tool loop calls), ``trl.trainer.utils._use_triton`` (which positions the
fused log-prob scores) and ``trl.chat_template_utils._SUPPORTS_RESPONSE_TEMPLATE`` (which parser form transformers
reads).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from trade_core.cpu_generation import fast_cpu_sampling
from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_records.metrics import TRL_CLIPPED, MetricsLine, append_metrics
from trade_tools.episode import MAX_TURNS, EpisodeSettings
from trade_train.rollouts import Rollout, record_step, step_metrics

log = structlog.get_logger("trade.train")

SOURCE = "trl-grpo"
"""``Trajectory.source`` of the records this trainer writes."""
CONFIG = "run.json"


class GRPOSettings(BaseModel):
    """The GRPO run; defaults do a few steps of the tiny model on 2 CPU cores in a minute or two."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # run.json is JSON: inf would come back null

    steps: int = Field(2, ge=1, description="optimizer steps, one batch of rollouts each")
    num_generations: int = Field(4, ge=2, description="rollouts per task (the GRPO group)")
    batch_size: int = Field(4, ge=1, description="rollouts per step: tasks per step x num_generations")
    max_turns: int = Field(MAX_TURNS, ge=1, description="replies a day allows (the prompt states 16)")
    max_completion_length: int = Field(768, ge=16, description="tokens of all replies and tool texts of a rollout")
    max_reply_tokens: int | None = Field(
        None, ge=16, description="prefix-grpo only: tokens one reply may take (None: what the rollout has left)"
    )
    learning_rate: float = Field(1e-5, gt=0)
    lr_scheduler: Literal["linear", "constant", "cosine"] = Field(
        "linear", description="how the rate moves over the steps (linear: to 0 at the last step)"
    )
    temperature: float = Field(1.0, gt=0)
    top_k: int = Field(50, ge=0)
    beta: float = Field(0.0, ge=0, description="KL coefficient; 0 loads no reference model")
    lora_rank: int = Field(0, ge=0, description="LoRA rank (needs peft); 0 trains every weight")
    train_layers: int = Field(
        0, ge=0, description="train only the top N decoder layers (and the final norm); 0 trains every weight"
    )
    precision: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="prefix-grpo on CPU only: bfloat16 runs the matrix products in bf16 (weights and updates stay "
        "float32); the trade_core.cpu_generation.cpu_precision of the machine",
    )
    seed: int = 0

    @model_validator(mode="after")
    def _whole_groups(self) -> GRPOSettings:
        if self.batch_size % self.num_generations:
            raise ValueError(
                f"batch_size={self.batch_size} is not a multiple of num_generations={self.num_generations}"
            )
        return self


class RunConfig(BaseModel):
    """``run.json``: everything the run reads."""

    model_config = ConfigDict(extra="forbid")

    model: str
    tasks: Path
    data: Path
    reward: str
    device: Literal["cpu", "gpu"]
    run_dir: Path
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)


class Scorer:
    """TRL's reward function: each rollout's day replayed and scored; the batch kept for :class:`StepRecorder`."""

    __name__ = "trade_reward"  # TRL names the reward column after it

    def __init__(self, scheme: str, budget: int, store: MarketStore) -> None:
        self.scheme, self.budget, self.store = scheme, budget, store
        self.rollouts: list[Rollout] = []

    def __call__(
        self, completions: list[list[dict[str, Any]]], completion_ids: list[list[int]], environments: list, **kw: Any
    ) -> list[float]:
        batch = [
            env.rollout(env.finish(c, out_of_tokens=len(ids) >= self.budget, budget=self.budget), self.scheme)
            for c, ids, env in zip(completions, completion_ids, environments, strict=True)
        ]
        self.rollouts += batch
        if metrics := step_metrics(batch, self.store):
            for key, value in metrics.flat().items():
                kw["log_metric"](key, value)
        return [rollout.score for rollout in batch]

    def take(self) -> list[Rollout]:
        taken, self.rollouts = self.rollouts, []
        return taken


TRL_CLIPPED_LOG = TRL_CLIPPED.removeprefix("trl/")
"""The name TRL logs its clipped ratio under (:data:`~trade_records.metrics.TRL_CLIPPED` in metrics.jsonl)."""


def step_recorder(scorer: Scorer, run_dir: Path, model: str) -> Any:
    """A TrainerCallback writing each step's metrics line and Trajectory records (TRL is imported late). The
    line waits for the step's log (which follows the step's end) to carry TRL's own clipped ratio beside ours."""
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        pending: MetricsLine | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            rollouts = scorer.take()
            if rollouts:
                self.write()  # a step whose log never came
                self.pending = record_step(run_dir, SOURCE, state.global_step, rollouts, scorer.store, model)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if self.pending is not None and logs and TRL_CLIPPED_LOG in logs:
                self.pending.trainer[TRL_CLIPPED] = float(logs[TRL_CLIPPED_LOG])
                self.write()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.write()

        def write(self) -> None:
            if self.pending is not None:
                append_metrics(run_dir, self.pending)
                self.pending = None

    return StepRecorder()


class AnyTool(dict):
    """One rollout's ``{name: method}`` for TRL's tool loop in which every name is found: one the tools do not
    have goes to the rollout's Episode, so the model reads the Episode's error (as in verl and evaluation)
    instead of TRL's English one, and the Episode counts it."""

    def __init__(self, tools: dict[str, Any], environment: Any) -> None:
        super().__init__(tools)
        self.environment = environment

    def __contains__(self, name: object) -> bool:
        return True

    def __missing__(self, name: str) -> Any:
        return lambda **arguments: self.environment._call(name, arguments)


class ToolDicts(list):
    """TRL's list of per-rollout tool dicts (filled by ``append`` in rollout order), each made an AnyTool."""

    def __init__(self, environments: list[Any]) -> None:
        super().__init__()
        self.environments = environments

    def append(self, tools: dict[str, Any]) -> None:
        super().append(AnyTool(tools, self.environments[len(self)]))


class ScoreModelTokens:
    """The model as TRL's log-prob pass calls it, with the labels of tool-result tokens set to -100, so the
    vocabulary projection runs on the tokens the model wrote only. The loss and its metrics mask those tokens out
    anyway (``tool_mask``), so every number is the same; the tool texts were three quarters of a trading day's
    completion, and the projection over 151,936 entries per token was most of a CPU step."""

    def __init__(self, model: Any, written: Any) -> None:
        self.model, self.written, self.row = model, written, 0

    def __call__(self, *args: Any, labels: Any = None, **kwargs: Any) -> Any:
        if labels is not None:
            rows = self.written[self.row : self.row + labels.shape[0]]
            labels = labels.clone()
            labels[:, -rows.shape[1] :][rows == 0] = -100
            self.row += labels.shape[0]
        return self.model(*args, labels=labels, **kwargs)


def grpo_trainer() -> type:
    """TRL's GRPOTrainer whose per-rollout tool dicts are :class:`ToolDicts`, scoring the model's own tokens
    only (:class:`ScoreModelTokens`)."""
    from trl import GRPOTrainer

    class TradeGRPOTrainer(GRPOTrainer):
        _written = None

        @property
        def _sync_tool_dicts(self) -> ToolDicts:
            return self.__dict__["_trade_tool_dicts"]

        @_sync_tool_dicts.setter
        def _sync_tool_dicts(self, value: list) -> None:
            self.__dict__["_trade_tool_dicts"] = ToolDicts(self.environments)

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            self._written = inputs.get("tool_mask")
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._written = None

        def _get_per_token_logps_and_entropies(self, model: Any, *args: Any, **kwargs: Any) -> Any:
            if self._written is not None:
                model = ScoreModelTokens(model, self._written)
            return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)

    return TradeGRPOTrainer


def tokenizer_for(model: str) -> Any:
    """The model's tokenizer with TRL's tool-call parser. TRL knows released chat templates by their text; a Qwen3
    model whose template it does not know (the tiny model's is a rewrite that renders the same strings) gets
    TRL's copy of Qwen3's own; a ChatML base of ``trade model`` keeps its own template (hermes calls, no thinking)
    and gets TRL's reader of hermes calls."""
    from transformers import AutoConfig, AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    from trade_tools.toolcalls import HERMES, STATED_FORMAT

    tokenizer = AutoTokenizer.from_pretrained(model)
    try:
        return add_response_schema(tokenizer)
    except ValueError:
        config = AutoConfig.from_pretrained(model)
    family = config.model_type
    if family == "qwen3":
        tokenizer.chat_template = qwen3_chat_template
        return add_response_schema(tokenizer)
    stated = getattr(config, STATED_FORMAT, None)  # a `trade model` base's own word
    if stated == HERMES and tokenizer.chat_template and "<tool_call>" in tokenizer.chat_template:
        return read_hermes_calls(tokenizer)
    raise TradeError(
        f"TRL cannot parse tool calls with the chat template of {model} ({family})",
        hint="use a model with a chat template TRL 1.16 knows (Qwen3, Qwen3.5, Llama 3, ...) or a `trade model` base",
    )


def read_hermes_calls(tokenizer: Any) -> Any:
    """``tokenizer`` with the response parser TRL gives Qwen3 (ChatML turns, hermes ``<tool_call>`` JSON), in the
    form the installed transformers reads."""
    from trl.chat_template_utils import _SUPPORTS_RESPONSE_TEMPLATE, qwen3_schema, qwen3_template

    if _SUPPORTS_RESPONSE_TEMPLATE:
        tokenizer.response_template = qwen3_template
    else:
        tokenizer.response_schema = qwen3_schema
    return tokenizer


def score_only_completions_on_cpu() -> None:
    """TRL 1.16 scores every position of a sequence where Triton does not run (prompt included: ~3,000 tokens of
    a trading prompt against a few hundred of completion, each over the 151,936-token vocabulary) and masks the
    prompt afterwards; on CPU, score only the completion tokens, as it does on CUDA (same numbers, ~10x faster)."""
    import trl.trainer.utils as utils
    from trl.kernels.chunked_logprob import _use_triton

    utils._use_triton = lambda device: device.type == "cpu" or _use_triton(device)


def train(config: RunConfig) -> Path:
    """Run the GRPO steps; returns the folder of the trained model (``model/`` in the run folder)."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset
    from trl import GRPOConfig

    from trade_reward.taskfolder import read_records
    from trade_tools.episode import Episode
    from trade_train.store import market_store
    from trade_train.trl_grpo.environment import environment_class

    grpo, run_dir = config.grpo, config.run_dir.resolve()
    if config.device == "cpu":
        score_only_completions_on_cpu()
    records = read_records(config.tasks, "train")
    if not records:
        raise TradeError(f"tasks folder {config.tasks} has no train task", hint="rebuild it with `trade data tasks`")
    if len({r.task.anonymized for r in records}) > 1:  # one tool schema set is rendered into every prompt
        raise TradeError(f"tasks folder {config.tasks}: anonymized and plain tasks are mixed", hint="rebuild it")
    settings = EpisodeSettings(max_turns=grpo.max_turns)
    schemas = Episode.start(records[0].task, market_store(config.data), settings=settings).tool_schemas()
    rows = [
        {
            "prompt": r.prompt,
            "task": r.task.model_dump_json(),
            "ground_truth": r.ground_truth.model_dump_json(),
            "index": r.index,
        }
        for r in records
    ]
    args = GRPOConfig(
        output_dir=str(run_dir / "checkpoints"),
        max_steps=grpo.steps,
        per_device_train_batch_size=grpo.batch_size,
        gradient_accumulation_steps=1,
        num_generations=grpo.num_generations,
        max_completion_length=grpo.max_completion_length,
        max_tool_calling_iterations=grpo.max_turns,
        learning_rate=grpo.learning_rate,
        lr_scheduler_type=grpo.lr_scheduler,
        temperature=grpo.temperature,
        top_k=grpo.top_k,
        top_p=1.0,
        beta=grpo.beta,
        seed=grpo.seed,
        use_cpu=config.device == "cpu",
        model_init_kwargs=None if grpo.train_layers else {"dtype": torch.float32 if config.device == "cpu" else "auto"},
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
    )
    model: Any = config.model
    if grpo.train_layers:
        from transformers import AutoModelForCausalLM

        from trade_train.pretrained.sft import freeze_below

        dtype = torch.float32 if config.device == "cpu" else "auto"
        model = AutoModelForCausalLM.from_pretrained(config.model, dtype=dtype)
        freeze_below(model, grpo.train_layers)
    peft = None
    if grpo.lora_rank:
        from peft import LoraConfig

        peft = LoraConfig(r=grpo.lora_rank, lora_alpha=2 * grpo.lora_rank, target_modules="all-linear")
    scorer = Scorer(config.reward, grpo.max_completion_length, market_store(config.data))
    trainer = grpo_trainer()(
        model=model,
        processing_class=tokenizer_for(config.model),
        reward_funcs=[scorer],
        args=args,
        train_dataset=Dataset.from_list(rows),
        peft_config=peft,
        environment_factory=environment_class(config.data, settings, schemas),
        callbacks=[step_recorder(scorer, run_dir, config.model)],
    )
    # The prompt shows the Episode's own schemas (what verl and evaluation show), not TRL's rendering of the
    # methods' docstrings, which differs in key order, nullable fields and whitespace.
    trainer._env_tools = {name: list(schemas) for name in trainer._env_tools}
    started = time.perf_counter()
    with fast_cpu_sampling(threads=None) if config.device == "cpu" else contextlib.nullcontext():
        trainer.train()
    out = run_dir / "model"
    trainer.save_model(str(out))
    log.info("trl_grpo.done", steps=grpo.steps, seconds=round(time.perf_counter() - started, 1), model=str(out))
    return out


def main(argv: list[str] | None = None) -> None:
    path = Path((argv if argv is not None else sys.argv[1:] or [CONFIG])[0])
    train(RunConfig.model_validate_json(path.read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
