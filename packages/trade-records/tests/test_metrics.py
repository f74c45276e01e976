"""A training step's metrics: computed from played rollouts, flat under the names loggers chart, and a run's
metrics.jsonl read back whole (a line being written, or another logger's, left out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trade_core.files import append_line
from trade_records.metrics import TRL_CLIPPED, MetricsLine, Played, StepMetrics, append_metrics, read_metrics
from trade_records.runfolder import METRICS
from trade_tools.grading import Reward


def _played(
    group: str, score: float, *, failure: str | None = None, status: str = "stopped", trades: int = 0
) -> Played:
    bucket = None if failure else round(score)
    reward = Reward(
        score=score,
        scheme="bucketed",
        r_new=score / 100,
        r_orig=0.0,
        r_outcome=score / 100,
        bucket=bucket,
        failure=failure,
    )
    return Played(group, reward, status, turns=2, tool_calls=3, tool_errors=1 if failure else 0, trades=trades)


STEP = [
    _played("a", 0.0),
    _played("a", 0.0),
    _played("b", 2.0, trades=1),
    _played("b", -3.0, failure="no_valid_call", status="failed"),
]


def test_a_step_counts_what_its_rollouts_did() -> None:
    metrics = StepMetrics.of(STEP, exploits=(1, 1.0))
    assert metrics is not None and StepMetrics.of([]) is None
    assert (metrics.trajectories, metrics.groups, metrics.stop_rate) == (4, 2, 0.75)
    assert metrics.reward["score"] == pytest.approx(-0.25) and metrics.reward["bucket"] == pytest.approx(2 / 3)
    assert metrics.failure["no_valid_call"] == 0.25 and metrics.status == {
        "stopped": 0.75,
        "truncated": 0.0,
        "failed": 0.25,
    }
    assert metrics.tool_error_rate == pytest.approx(1 / 12) and metrics.actions == 0.25
    assert (metrics.zero_variance_groups, metrics.zero_variance["identical"]) == (0.5, 0.5)  # group a: alike
    assert (metrics.buys, metrics.exploit_share) == (0.25, 1.0)


def test_the_flat_names_are_what_loggers_chart_and_read_back_the_same() -> None:
    metrics = StepMetrics.of(STEP)
    flat = metrics.flat()
    assert {
        "trade/reward/score/mean",
        "trade/failure/no_valid_call",
        "trade/status/stopped",
        "trade/stop_rate",
        "trade/zero_variance_groups",
        "trade/zero_variance/all_failed",
        "trade/turns/mean",
    } <= flat.keys()
    assert "trade/exploit_share" not in flat  # a market without a planted signal: unknown, not 0
    assert StepMetrics.from_flat({**flat, "critic/score/mean": 1.0}) == metrics  # verl's own keys beside ours
    assert StepMetrics.from_flat({"critic/score/mean": 1.0}) is None


def test_a_flat_step_warns_with_its_reasons() -> None:
    flat = StepMetrics.of([_played("a", -3.0, failure="no_valid_call"), _played("a", -3.0, failure="no_stop")])
    assert (
        flat.flat_warning()
        == "100% of this step's groups had no reward difference and taught nothing (all failed 100%)"
    )
    assert StepMetrics.of(STEP).flat_warning() is None


def test_metrics_lines_append_whole_and_read_back_without_a_partial_foreign_or_non_finite_line(tmp_path: Path) -> None:
    lines = [MetricsLine(step=n, metrics=StepMetrics.of(STEP[: n + 1]), trainer={TRL_CLIPPED: 0.25}) for n in (1, 2)]
    for line in lines:
        append_metrics(tmp_path, line)
    append_line(tmp_path / METRICS, json.dumps({"step": 3, "data": {"critic/score/mean": 0.1}}))  # another logger's
    append_line(
        tmp_path / METRICS, '{"step": 5, "trade/trajectories": 4, "trade/stop_rate": NaN, "trade/tool_error_rate": 0}'
    )
    append_line(
        tmp_path / METRICS,
        '{"step": 6, "trade/trajectories": "many", "trade/stop_rate": 1, "trade/tool_error_rate": 1e999}',
    )
    with open(tmp_path / METRICS, "a") as handle:
        handle.write('{"step": 4, "trade/trajectories": 4, "trade/st')  # a writer killed mid-line
    assert read_metrics(tmp_path) == lines
    assert json.loads((tmp_path / METRICS).read_text().splitlines()[0])[TRL_CLIPPED] == 0.25
    assert read_metrics(tmp_path / "missing") == []


def test_the_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    run = tmp_path / "quickstart" / "grpo"
    run.mkdir(parents=True)
    append_metrics(
        run, MetricsLine(step=1, metrics=StepMetrics.of(STEP, exploits=(1, 1.0)), trainer={TRL_CLIPPED: 0.5})
    )
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out == "1 -0.25 1.0 {'trl/completions/clipped_ratio': 0.5}\n"
