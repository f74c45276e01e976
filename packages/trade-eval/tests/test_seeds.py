"""``trade eval backtest --seeds K`` and ``--model-cutoff`` on the real data, through the CLI."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from trade_core.testing import run_trade
from trade_eval.memorisation import cutoff_warning
from trade_records.runfolder import MANIFEST, SEEDS, SUMMARY

ARGS = ("eval", "backtest", "--policy", "random", "--start-date", "2025-06-20", "--num-days", "4")


@pytest.fixture(scope="module")
def seeds(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("seeds") / "random"
    done = run_trade(*ARGS, "--seeds", "3", "--seed", "5", "--data", str(sample_dataset), "--out", str(out))
    assert done.code == 0, done.err
    return out, done.out


@pytest.mark.real_data
def test_each_seed_is_a_run_on_one_pool_and_the_spread_is_mean_sd_min_max(seeds: tuple[Path, str]) -> None:
    out, printed = seeds
    manifests = [json.loads((out / f"seed-{s}" / MANIFEST).read_text()) for s in (5, 6, 7)]
    assert [m["sampling"]["seed"] for m in manifests] == [5, 6, 7]
    assert len({json.dumps(m["pool"]) for m in manifests}) == 1 and manifests[0]["pool"]["seed"] == 5
    spread = json.loads((out / SEEDS).read_text())
    assert spread["seeds"] == [5, 6, 7]
    totals = [
        json.loads((out / f"seed-{s}" / SUMMARY).read_text())["rows"]["random"]["total_return"] for s in (5, 6, 7)
    ]
    found = spread["rows"]["random"]["total_return"]
    assert found["values"] == totals and len(set(totals)) == 3  # the random policy's draws differ by seed
    assert found["mean"] == pytest.approx(np.mean(totals)) and found["sd"] == pytest.approx(np.std(totals, ddof=1))
    assert (found["min"], found["max"]) == (min(totals), max(totals))
    for name in ("hold", "equal-weight", "momentum", "CSI300"):
        assert spread["rows"][name]["total_return"]["sd"] == 0  # deterministic: no spread
    line = next(line for line in printed.splitlines() if line.startswith("total return"))
    assert f"{found['mean']:+.2%} ± {found['sd']:.2%}" in line and "+" in line.split()[-3]
    assert printed.rstrip().endswith("mean ± sd (ddof=1) over 3 seeds 5..7")


def test_seeds_resume_and_their_parent_is_no_single_run(seeds: tuple[Path, str], sample_dataset: Path) -> None:
    out, _ = seeds
    before = (out / SEEDS).read_text()
    again = run_trade(
        *ARGS, "--seeds", "3", "--seed", "5", "--data", str(sample_dataset), "--out", str(out), "--resume"
    )
    assert again.code == 0, again.err
    assert json.loads((out / SEEDS).read_text())["rows"] == json.loads(before)["rows"]
    report = run_trade("eval", "report", str(out), "--out", str(out.parent / "r.html"))
    assert report.code == 2 and len(report.err.splitlines()) == 1
    assert report.err.startswith(f"error: {out} holds the runs of --seeds 3, not one run: pass its seed folders")
    assert f"trade eval report {out}/seed-5 {out}/seed-6 {out}/seed-7" in report.err
    assert (
        run_trade(
            "eval", "report", *(str(out / f"seed-{s}") for s in (5, 6, 7)), "--out", str(out.parent / "r.html")
        ).code
        == 0
    )


def test_cutoff_warning_only_before_the_end_of_the_cutoff_month() -> None:
    assert cutoff_warning("2025-06", dt.date(2025, 7, 1)) is None
    assert cutoff_warning(None, dt.date(2025, 6, 1)) is None
    line = cutoff_warning("2025-06", dt.date(2025, 6, 30))
    assert line and line.startswith("warning: the evaluated window starts 2025-06-30, before the end of the model's")
    assert cutoff_warning("2024-02", dt.date(2024, 2, 29)) and not cutoff_warning("2024-02", dt.date(2024, 3, 1))


def test_model_cutoff_warns_on_stderr_and_is_recorded(sample_dataset: Path, tmp_path: Path) -> None:
    base = ["eval", "backtest", "--policy", "hold", "--num-days", "2", "--data", str(sample_dataset)]
    done = run_trade(*base, "--start-date", "2025-06-20", "--model-cutoff", "2025-07", "--out", str(tmp_path / "a"))
    assert done.code == 0, done.err
    warned = [line for line in done.err.splitlines() if line.startswith("warning: ")]
    assert warned == [cutoff_warning("2025-07", dt.date(2025, 6, 20))]
    assert "eval.before_model_cutoff" in done.err  # the structlog event
    assert json.loads((tmp_path / "a" / MANIFEST).read_text())["model_cutoff"] == "2025-07"
    later = run_trade(*base, "--start-date", "2025-08-01", "--model-cutoff", "2025-07", "--out", str(tmp_path / "b"))
    assert later.code == 0 and "warning: " not in later.err
    bad = run_trade(*base, "--start-date", "2025-08-01", "--model-cutoff", "2025-13", "--out", str(tmp_path / "c"))
    assert bad.code == 2 and "'2025-13' is not a month YYYY-MM" in bad.err
