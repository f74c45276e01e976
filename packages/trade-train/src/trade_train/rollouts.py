"""What one training step leaves behind, in our terms, whichever trainer ran it: Rollouts and trading metrics.

A :class:`Rollout` is one scored trajectory of a GRPO group; verl's trainer makes them from the ``extra_fields``
it keeps (:func:`trade_train.verl_grpo.schema.rollout`), TRL's from the day it replays. This module turns
Rollouts into a step's metrics (:class:`~trade_records.metrics.StepMetrics`) and into Trajectory records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog
from pydantic import BaseModel, Field

from trade_core.plugins import get_manager
from trade_data.store import MarketStore
from trade_records.metrics import PREFIX, MetricsLine, Played, StepMetrics
from trade_records.runfolder import ROLLOUTS, step_file
from trade_tools.episode import Episode
from trade_tools.exploit import exploits
from trade_tools.grading import GroundTruth, Reward
from trade_tools.trajectory import Message, Trajectory, write_trajectories
from trade_train.hookspecs import trade_step_metrics

log = structlog.get_logger("trade.train")


class Rollout(BaseModel):
    """One trajectory of a step: its GRPO group (the prompt's uid), score, Episode, reward and conversation."""

    group: str
    episode: Episode
    reward: Reward
    conversation: list[Message]
    ground_truth: GroundTruth | None = Field(None, description="the row's ground truth, so records can be rescored")

    @property
    def score(self) -> float:
        return self.reward.score

    def played(self) -> Played:
        """What the step's metrics read of it."""
        episode = self.episode
        trades = sum(a.accepted and a.type in ("buy", "sell") for a in episode.actions)
        counts = (episode.turns, episode.tool_calls, episode.tool_errors, trades)
        return Played(self.group, self.reward, episode.status, *counts)

    def trajectory(self, *, model: str = "", step: int | None = None) -> Trajectory:
        """The record evaluation and distillation read (`trade reward variance` rescores it by its ground truth)."""
        return Trajectory(
            task_id=self.episode.task.task_id,
            source="verl",
            model=model,
            step=step,
            episode=self.episode,
            messages=self.conversation,
            ground_truth=self.ground_truth,
            reward=self.reward,
        )


def step_metrics(rollouts: Sequence[Rollout], store: MarketStore | None = None) -> StepMetrics | None:
    """The trading metrics of one step (None for no rollouts); on a ``store`` with a planted signal the step's
    buys and its exploit share too (:mod:`trade_tools.exploit`)."""
    exploit = None
    if store is not None and store.planted_signal:
        bought = exploits((rollout.episode for rollout in rollouts), store, store.planted_signal)
        exploit = (bought.buys, bought.share)
    return StepMetrics.of([rollout.played() for rollout in rollouts], exploit)


def record_step(
    run_dir: Path,
    trainer: str,
    step: int,
    rollouts: Sequence[Rollout],
    store: MarketStore,
    model: str,
    figures: Mapping[str, float] | None = None,
) -> MetricsLine:
    """What a single-machine trainer leaves of a step: its Trajectory records (``rollouts/trajectories/{step}``),
    its log line, the plugins' ``trade_step_metrics`` event and a warning for groups that could not learn; returns
    the step's metrics line with the trainer's own ``figures``, for the caller to append when it has them all."""
    metrics = step_metrics(rollouts, store)
    if metrics is None:
        raise ValueError(f"step {step} has no rollouts")
    records = [r.trajectory(model=model, step=step).model_copy(update={"source": trainer}) for r in rollouts]
    write_trajectories(step_file(run_dir / ROLLOUTS, step), records)
    flat = metrics.flat()
    short = {k.removeprefix(PREFIX): round(v, 4) for k, v in flat.items()}
    log.info(f"{trainer.replace('-', '_')}.step", step=step, **short)
    get_manager().notify(trade_step_metrics, trainer=trainer, step=step, metrics=flat)
    if warning := metrics.flat_warning():
        log.warning(f"{trainer.replace('-', '_')}.flat_groups", step=step, warning=warning)
    return MetricsLine(step=step, metrics=metrics, trainer=dict(figures or {}))
