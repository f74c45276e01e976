"""What the run learned, in numbers read from its own files: GRPO's per-step metrics and the held-out summaries."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import NamedTuple

import numpy as np

from trade_reward.schemes import FAILURES
from trade_tools.runfolder import METRICS, TasksSummary, read_jsonl

STEP_COLUMNS = {
    "trade/reward/score/mean": "mean reward",
    "trade/exploit_share": "exploit share",
    "trade/failure/no_valid_call": "no valid call",
    "trade/failure/truncated": "truncated",
    "trl/completions/clipped_ratio": "clipped (TRL)",
    "trade/failure/no_stop": "no stop",
    "trade/tool_error_rate": "tool-error rate",
    "trade/stop_rate": "stop rate",
    "trade/zero_variance_groups": "zero-variance groups",
}
"""The columns of the per-step table: the ``trade/...`` metrics trl-grpo writes to metrics.jsonl, and TRL's own
clipped ratio (rollouts that ended without an end-of-turn token: cut by the budget, or on a tool text), which
counts rollouts our scoring may have ended otherwise (stopped before the cut, or a reply without a call)."""


def step_metrics(run_dir: Path) -> list[dict[str, float]]:
    """metrics.jsonl of a trl-grpo run: one dict per optimizer step (a line still being written left out)."""
    return read_jsonl(Path(run_dir) / METRICS)


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


def halves(steps: list[dict[str, float]], key: str) -> tuple[Half, Half] | None:
    """``key`` over the first and the second half of the steps that logged it (one step: that step twice),
    each step weighted by its rollouts (``trade/trajectories``), so a step with few scored rollouts counts little."""
    logged = [step for step in steps if key in step]
    if not logged:
        return None
    cut = max(1, len(logged) // 2)
    return _half(logged[:cut], key), _half(logged[-cut:], key)


def _half(steps: list[dict[str, float]], key: str) -> Half:
    values = np.array([step[key] for step in steps])
    weights = np.array([step.get("trade/trajectories", 1.0) for step in steps])
    span = (int(steps[0]["step"]), int(steps[-1]["step"]))
    mean = float(np.average(values, weights=weights))
    if len(steps) < 2:
        return Half(mean, None, span)
    picks = np.random.default_rng(0).integers(0, len(steps), size=(RESAMPLES, len(steps)))
    resampled = (values[picks] * weights[picks]).sum(axis=1) / weights[picks].sum(axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return Half(mean, (float(low), float(high)), span)


def step_chart(steps: list[dict[str, float]]) -> bytes:
    """grpo.png: mean reward, exploit share and zero-variance share per GRPO step (PNG bytes)."""
    import io

    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 6.5), dpi=110, layout="constrained")
    panels = (
        ("trade/reward/score/mean", "mean rollout reward", None),
        ("trade/exploit_share", "exploit share (buys of the signal's top stock)", (0, 1)),
        ("trade/zero_variance_groups", "groups without a reward difference", (0, 1)),
    )
    for row, (key, title, limits) in enumerate(panels, start=1):
        axes = figure.add_subplot(len(panels), 1, row)
        points = [(step["step"], step[key]) for step in steps if key in step]
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
