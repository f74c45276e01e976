"""What the run learned, in numbers read from its own files: GRPO's per-step metrics and the held-out summaries."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from trade_data.store import MarketStore
from trade_records.metrics import TRL_CLIPPED, MetricsLine
from trade_records.runfolder import TasksSummary
from trade_reward.schemes import FAILURES
from trade_reward.taskfolder import TaskRecord

Figure = Callable[[MetricsLine], "float | None"]
"""One per-step figure read from a metrics line (None where the step has none)."""


def reward(line: MetricsLine) -> float | None:
    return line.metrics.reward.get("score")


def exploit_share(line: MetricsLine) -> float | None:
    return line.metrics.exploit_share


def zero_variance(line: MetricsLine) -> float | None:
    return line.metrics.zero_variance_groups


def _failure(kind: str) -> Figure:
    return lambda line: line.metrics.failure.get(kind)


STEP_COLUMNS: dict[str, tuple[Figure, str]] = {
    "mean reward": (reward, "+.3f"),
    "exploit share": (exploit_share, ".0%"),
    "no valid call": (_failure("no_valid_call"), ".0%"),
    "truncated": (_failure("truncated"), ".0%"),
    "clipped (TRL)": (lambda line: line.trainer.get(TRL_CLIPPED), ".0%"),
    "no stop": (_failure("no_stop"), ".0%"),
    "tool-error rate": (lambda line: line.metrics.tool_error_rate, ".0%"),
    "stop rate": (lambda line: line.metrics.stop_rate, ".0%"),
    "zero-variance groups": (zero_variance, ".0%"),
}
"""The columns of the per-step table, with their formats: our metrics of each trl-grpo step, and TRL's own clipped
ratio (rollouts that ended without an end-of-turn token: cut by the budget, or on a tool text), which counts
rollouts our scoring may have ended otherwise (stopped before the cut, or a reply without a call)."""


def failure_rate(summary: TasksSummary) -> float | None:
    """Share of a tasks run's played episodes scored as any failure (no valid call, truncated, no stop, ...)."""
    failed = sum(count for reason, count in summary.failure_reasons.items() if reason in FAILURES)
    return failed / summary.played if summary.played else None


def failure_share(summary: TasksSummary, reason: str) -> float | None:
    return summary.failure_reasons.get(reason, 0) / summary.played if summary.played else None


class Half(NamedTuple):
    """A per-step figure over half of the run's steps: weighted by each step's rollouts, with its interval."""

    mean: float
    interval: tuple[float, float] | None
    """95% percentile interval of the weighted mean, steps resampled (None from a single step)."""
    steps: tuple[int, int]
    """First and last step of the half."""


RESAMPLES = 2000


def halves(steps: list[MetricsLine], figure: Figure) -> tuple[Half, Half] | None:
    """``figure`` over the first and the second half of the steps that have it (one step: that step twice),
    each step weighted by its rollouts, so a step with few scored rollouts counts little."""
    logged = [(step, value) for step in steps if (value := figure(step)) is not None]
    if not logged:
        return None
    cut = max(1, len(logged) // 2)
    return _half(logged[:cut]), _half(logged[-cut:])


def _half(logged: list[tuple[MetricsLine, float]]) -> Half:
    values = np.array([value for _, value in logged])
    weights = np.array([step.metrics.trajectories for step, _ in logged], dtype=float)
    span = (logged[0][0].step, logged[-1][0].step)
    mean = float(np.average(values, weights=weights))
    if len(logged) < 2:
        return Half(mean, None, span)
    picks = np.random.default_rng(0).integers(0, len(logged), size=(RESAMPLES, len(logged)))
    resampled = (values[picks] * weights[picks]).sum(axis=1) / weights[picks].sum(axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return Half(mean, (float(low), float(high)), span)


def step_chart(steps: list[MetricsLine]) -> bytes:
    """grpo.png: mean reward, exploit share and zero-variance share per GRPO step (PNG bytes)."""
    import io

    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 6.5), dpi=110, layout="constrained")
    panels = (
        (reward, "mean rollout reward", None),
        (exploit_share, "exploit share (buys of the signal's top stock)", (0, 1)),
        (zero_variance, "groups without a reward difference", (0, 1)),
    )
    for row, (figure_of, title, limits) in enumerate(panels, start=1):
        axes = figure.add_subplot(len(panels), 1, row)
        points = [(step.step, value) for step in steps if (value := figure_of(step)) is not None]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", markersize=3, linewidth=1.2, color="#1f77b4")
        axes.set_title(title, loc="left", fontsize=10)
        axes.grid(True, color="#e5e5e5", linewidth=0.8)
        if limits:
            axes.set_ylim(*limits)
        axes.set_xlabel("GRPO step" if row == len(panels) else "")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def chance_share(pools: list[int]) -> float | None:
    """The exploit share of a buyer picking a pool stock at random: the mean of 1 / pool size."""
    return statistics.fmean(1 / size for size in pools) if pools else None


class RealisedIC(NamedTuple):
    """The planted signal's rank correlation with the next day's return across a task's pool, over the tasks."""

    mean: float
    interval: tuple[float, float] | None
    """95% percentile interval of the mean, tasks resampled (None from fewer than two tasks)."""
    tasks: int


def realised_ic(store: MarketStore, records: Sequence[TaskRecord], signal: str) -> RealisedIC | None:
    """Each task's Spearman correlation, across its pool, of ``signal`` at T0 (as ``compute_alpha_factor`` ranks
    it) with the T+1 return of the task's ground truth; the mean over the tasks with three or more ranked stocks."""
    from trade_tools.episode import Episode
    from trade_tools.exploit import signal_ranking

    ics = []
    for record in records:
        growth = record.ground_truth.growth
        ranked = signal_ranking(Episode.start(record.task, store).view, signal, record.task.pool)
        ranked = [s for s in ranked if s in growth and np.isfinite(growth[s][0])]
        if len(ranked) < 3:
            continue
        by_signal = -np.arange(len(ranked), dtype=float)  # the ranking is high to low
        by_return = np.argsort(np.argsort([growth[s][0] for s in ranked])).astype(float)
        ics.append(float(np.corrcoef(by_signal, by_return)[0, 1]))
    if not ics:
        return None
    values = np.array(ics)
    if len(values) < 2:
        return RealisedIC(float(values.mean()), None, 1)
    picks = np.random.default_rng(0).integers(0, len(values), size=(RESAMPLES, len(values)))
    low, high = np.percentile(values[picks].mean(axis=1), [2.5, 97.5])
    return RealisedIC(float(values.mean()), (float(low), float(high)), len(values))
