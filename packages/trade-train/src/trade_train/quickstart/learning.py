"""What the run learned, in numbers read from its own files: GRPO's per-step metrics and the held-out summaries."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from trade_reward.schemes import FAILURES

STEP_COLUMNS = {
    "trade/reward/score/mean": "mean reward",
    "trade/failure/no_valid_call": "no valid call",
    "trade/failure/truncated": "truncated",
    "trade/failure/no_stop": "no stop",
    "trade/tool_error_rate": "tool-error rate",
    "trade/stop_rate": "stop rate",
    "trade/zero_variance_groups": "zero-variance groups",
}
"""The columns of the per-step table: the ``trade/...`` metrics trl-grpo writes to metrics.jsonl."""


def step_metrics(run_dir: Path) -> list[dict[str, float]]:
    """metrics.jsonl of a trl-grpo run: one dict per optimizer step."""
    path = Path(run_dir) / "metrics.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.strip()]


def failure_rate(summary: dict[str, Any]) -> float | None:
    """Share of a tasks run's played episodes scored as any failure (no valid call, truncated, no stop, ...)."""
    played = summary["played"]
    failed = sum(count for reason, count in summary["failure_reasons"].items() if reason in FAILURES)
    return failed / played if played else None


def failure_share(summary: dict[str, Any], reason: str) -> float | None:
    played = summary["played"]
    return summary["failure_reasons"].get(reason, 0) / played if played else None


def halves(steps: list[dict[str, float]], key: str) -> tuple[float | None, float | None]:
    """Mean of ``key`` over the first and the second half of the steps (one step: that step twice)."""
    values = [step[key] for step in steps if key in step]
    if not values:
        return None, None
    cut = max(1, len(values) // 2)
    return statistics.fmean(values[:cut]), statistics.fmean(values[-cut:])
