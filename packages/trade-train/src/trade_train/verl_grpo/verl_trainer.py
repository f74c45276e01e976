"""The trading metrics and Trajectory records inside verl 0.9.1's trainer (the process verl calls TaskRunner).

verl's V1 trainer has no hook for a step's own metrics or records. ``trade train`` therefore launches
``python -m trade_train.verl_grpo.main``: verl's ``main_ppo`` with :class:`TradeTaskRunner`, which, before
verl picks the trainer class for ``trainer.v1.trainer_mode``, swaps every class in verl's trainer registry
for a subclass with :class:`TradingMetrics` mixed in. Each step then logs ``trade/...`` metrics (see
:func:`~trade_train.rollouts.step_metrics`) beside verl's own, and, where verl dumps rollouts
(``trainer.rollout_data_dir``), writes the step's Trajectory records to ``trajectories/{step}.jsonl`` there.

Private API of verl 0.9.1 this relies on (pin ``verl==0.9.1``; re-check when moving):
``trainer_base.TRAINER_REGISTRY``, ``PPOTrainer._compute_metrics(batch, metrics, timing_raw, global_steps,
epoch)`` and ``PPOTrainer._log_rollout_data(batch, timing_raw, rollout_data_dir)`` being called once per
step with the step's ``KVBatchMeta``, TransferQueue keys ``{uid}_{session}_{index}`` with the fields
``extra_fields`` and ``rm_scores``, and ``main_ppo.TaskRunnerV1.run(config)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray
import structlog
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer import main_ppo
from verl.trainer.ppo import v1
from verl.trainer.ppo.v1 import trainer_base

from trade_core.plugins import get_manager
from trade_records.runfolder import step_file
from trade_tools.trajectory import write_trajectories
from trade_train.hookspecs import trade_step_metrics
from trade_train.rollouts import Rollout, step_metrics
from trade_train.verl_grpo.schema import EPISODE, rollout

log = structlog.get_logger("trade.train")


def rollouts_in(batch: KVBatchMeta) -> list[Rollout]:
    """The step's trajectories read back from TransferQueue (padding rows and foreign loops left out)."""
    wanted = ["extra_fields", "rm_scores", "reward_model"]
    fields = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=wanted)
    scores = [float(row.sum()) for row in fields["rm_scores"].unbind(0)]
    rows = zip(batch.keys, batch.tags, scores, list(fields["extra_fields"]), list(fields["reward_model"]), strict=True)
    found = []
    for key, tag, score, extra, reward_model in rows:
        if tag.get("is_padding") or not isinstance(extra, dict) or EPISODE not in extra:
            continue
        truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
        found.append(rollout(key.rsplit("_", 2)[0], score, extra, truth))
    return found


def write_step_trajectories(rollouts: list[Rollout], folder: Path, step: int, model: str) -> Path:
    """The step's records in the rollout folder (``folder/trajectories/{step}.jsonl``), written atomically."""
    records = [rollout.trajectory(model=model, step=step) for rollout in rollouts]
    return write_trajectories(step_file(folder, step), records)


class TradingMetrics:
    """Mixed into verl's trainer classes: ``trade/...`` metrics per step, Trajectory records beside the dumps."""

    config: Any
    global_steps: int
    _trade_step: tuple[tuple[str, ...], list[Rollout]] = ((), [])

    def _rollouts(self, batch: KVBatchMeta) -> list[Rollout]:
        """The step's rollouts, read from TransferQueue once for both the metrics and the records."""
        keys = tuple(batch.keys)
        if self._trade_step[0] != keys:
            self._trade_step = (keys, rollouts_in(batch))
        return self._trade_step[1]

    def _compute_metrics(self, batch: KVBatchMeta, metrics: dict, timing_raw: dict, global_steps: int, epoch: int):
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)  # type: ignore[misc]
        trading = step_metrics(self._rollouts(batch))
        metrics.update(trading.flat() if trading else {})
        get_manager().notify(trade_step_metrics, trainer="verl-grpo", step=global_steps, metrics=metrics)
        if trading and (warning := trading.flat_warning()):
            log.warning("verl_grpo.flat_groups", step=global_steps, warning=warning)

    def _log_rollout_data(self, batch: KVBatchMeta, timing_raw: dict, rollout_data_dir: str) -> None:
        super()._log_rollout_data(batch, timing_raw, rollout_data_dir)  # type: ignore[misc]
        model = str(self.config.actor_rollout_ref.model.path)
        write_step_trajectories(self._rollouts(batch), Path(rollout_data_dir), self.global_steps, model)


def install() -> dict[str, type]:
    """Swap each trainer class in verl's registry for its TradingMetrics subclass (idempotent); the registry."""
    registry = trainer_base.TRAINER_REGISTRY
    assert registry, f"verl {v1.__name__} registered no trainer"
    for mode, cls in list(registry.items()):
        if not issubclass(cls, TradingMetrics):
            registry[mode] = type(cls.__name__, (TradingMetrics, cls), {"__module__": __name__})
    print(f"trade-train: trading metrics and trajectory records on for trainer modes {', '.join(sorted(registry))}")
    return registry


@ray.remote
class TradeTaskRunner(main_ppo.TaskRunnerV1.__ray_actor_class__):  # type: ignore[name-defined,misc]
    """verl's V1 TaskRunner with :func:`install` run first, in the Ray process that builds the trainer."""

    def run(self, config: Any) -> None:
        install()
        super().run(config)
