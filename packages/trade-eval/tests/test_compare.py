"""``trade eval compare`` on real backtest runs: paired by date, a verdict only beyond the noise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_records.runfolder import DAYS, SUMMARY


@pytest.fixture(scope="module")
def runs(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """momentum and hold over 20 days from 2025-06-20 on the real data, as `trade eval backtest` writes them."""
    folder = tmp_path_factory.mktemp("runs")
    for policy in ("momentum", "hold"):
        done = run_trade(
            "eval",
            "backtest",
            "--policy",
            policy,
            "--start-date",
            "2025-06-20",
            "--num-days",
            "20",
            "--data",
            str(sample_dataset),
            "--out",
            str(folder / policy),
        )
        assert done.code == 0, done.err
    return folder


def _shifted(run: Path, out: Path, daily: float = 0.0, year: int | None = None) -> Path:
    """A copy of a run whose NAV gains ``daily`` more each day (or whose dates move to another year)."""
    shutil.copytree(run, out)
    days = [json.loads(line) for line in (out / DAYS).read_text().splitlines()]
    for k, day in enumerate(days, start=1):
        day["nav"] *= (1 + daily) ** k
        day["date"] = f"{year}{day['date'][4:]}" if year else day["date"]
    (out / DAYS).write_text("".join(json.dumps(day) + "\n" for day in days))
    return out


def test_summary_rows_carry_intervals_attribution_and_the_method(runs: Path) -> None:
    summary = json.loads((runs / "momentum" / SUMMARY).read_text())
    for name, row in summary["rows"].items():
        for key in ("mean", "total_return", "sharpe", "excess_return_vs_index", "excess_return_vs_hold"):
            lo, hi = row[f"{key}_ci"]
            assert lo <= row[key] <= hi, (name, key)
        assert {"beta", "alpha", "r2_equal_weight"} <= row.keys()
    assert summary["rows"]["CSI300"]["beta"] == pytest.approx(1)
    assert summary["rows"]["equal-weight"]["r2_equal_weight"] == pytest.approx(1)
    assert "stationary bootstrap over days" in summary["conventions"]["ci"]


def test_momentum_against_hold_over_20_real_days(runs: Path) -> None:
    done = run_trade("eval", "compare", str(runs / "momentum"), str(runs / "hold"))
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0] == "A = momentum (momentum), B = hold (hold): 20 common days 2025-06-20 .. 2025-07-17"
    assert len(lines) == 5 and lines[-1].startswith("method: A minus B; 95% percentile intervals, stationary")
    as_json = json.loads(run_trade("eval", "compare", str(runs / "momentum"), str(runs / "hold"), "--json").out)
    assert as_json["common_days"] == 20 and as_json["verdicts"] == lines[1:4]
    for key, result in as_json["metrics"].items():
        beats = result["ci"][0] > 0 or result["ci"][1] < 0
        assert (" beats " in lines[1 + list(as_json["metrics"]).index(key)]) == beats


def test_a_clear_edge_beats_and_identical_runs_do_not(runs: Path, tmp_path: Path) -> None:
    better = _shifted(runs / "hold", tmp_path / "better", daily=0.002)
    done = run_trade("eval", "compare", str(runs / "hold"), str(better))
    assert done.code == 0, done.err
    edge = "better (hold) beats hold (hold) on mean daily return (+0.20%/day, 95% CI [+0.20%, +0.20%], 20 common days)"
    assert edge in done.out.splitlines()
    same = run_trade("eval", "compare", str(runs / "hold"), str(runs / "hold")).out.splitlines()[1:4]
    assert all(line.startswith("no difference distinguishable from noise on ") for line in same)


def test_not_a_run_folder_and_no_common_days_are_one_line_errors(runs: Path, tmp_path: Path) -> None:
    done = run_trade("eval", "compare", str(runs / "hold"), str(tmp_path))
    assert done.code == 2 and done.err.startswith(f"error: {tmp_path} is not a backtest or tasks run folder")
    other_year = _shifted(runs / "hold", tmp_path / "2024", year=2024)
    done = run_trade("eval", "compare", str(runs / "hold"), str(other_year))
    assert done.code == 2 and "share no finished trading day" in done.err and len(done.err.splitlines()) == 1


def test_a_non_finite_nav_is_a_one_line_error_not_a_verdict(runs: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(runs / "hold", damaged)
    days = [json.loads(line) for line in (damaged / DAYS).read_text().splitlines()]
    days[3]["nav"] = float("nan")
    (damaged / DAYS).write_text("".join(json.dumps(day) + "\n" for day in days))
    done = run_trade("eval", "compare", str(damaged), str(runs / "hold"))
    assert done.code == 2 and len(done.err.splitlines()) == 1, done.err
    assert f"the NAV of {days[3]['date']} is nan, not a positive number" in done.err
