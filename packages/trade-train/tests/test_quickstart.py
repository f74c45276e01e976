"""`trade quickstart`: a shortened loop end to end through the real CLI, resuming, and its one-line refusals."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

from trade_core.testing import run_trade

needs_extra = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("trl", "trade_eval")),
    reason="needs trade-train[quickstart] (tox -e trl)",
)
SHORT = ("--model", "tiny", "--days", "2", "--samples", "2", "--sft-steps", "40", "--steps", "1")
"""A few minutes on 2 shared cores with the tiny model: enough to run every stage, not to learn anything."""


def _state(out: Path) -> dict:
    return json.loads((out / "quickstart.json").read_text())


@pytest.mark.slow  # a few seconds: the CLI starts in a fresh process
def test_without_the_extra_it_names_the_install_in_one_line(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    # A meta-path finder that finds no trl, as in an install without the extra (sitecustomize runs at startup).
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoTrl:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'trl' or name.startswith('trl.'):\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, _NoTrl())\n"
    )
    run = run_trade("quickstart", "--out", str(tmp_path / "qs"), env={"PYTHONPATH": str(hide)})
    assert run.code == 2, run.err
    # trl where everything else is installed; without torch, the first of the stack that is missing
    assert re.match(r"error: trade quickstart needs \w+ \(", run.err) and "'trade-train[quickstart]'" in run.err
    assert len(run.err.strip().splitlines()) == 1, run.err
    assert not (tmp_path / "qs").exists()


@pytest.mark.slow
@needs_extra
def test_a_rerun_skips_finished_stages_and_refuses_other_flags(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    first = run_trade("quickstart", "--out", str(out), "--stop-after", "tasks", *SHORT)
    assert first.code == 0, first.err
    assert "stopped after tasks" in first.out and list(_state(out)["finished"]) == ["market", "tasks"]
    before = (out / "tasks" / "test.jsonl").read_bytes()
    again = run_trade("quickstart", "--out", str(out), "--stop-after", "tasks", *SHORT)
    assert again.code == 0, again.err
    assert "[1/7] market: done before" in again.out and "[2/7] tasks (embargoed splits): done before" in again.out
    assert (out / "tasks" / "test.jsonl").read_bytes() == before
    other = run_trade("quickstart", "--out", str(out), *SHORT[:-1], "2", "--seed", "1")
    assert other.code == 2
    assert other.err.startswith(f"error: {out} was started with --steps 1 (now 2), --seed 0 (now 1)"), other.err
    assert len(other.err.strip().splitlines()) == 1, other.err


@pytest.mark.slow
@needs_extra
@pytest.mark.parametrize(
    "flag",
    [
        ("--days", "0"),
        ("--steps", "0"),
        ("--samples", "-1"),
        ("--learning-rate", "-1"),
        ("--temperature", "-0.5"),
        ("--symbols", "2"),
        ("--model", "no-such-model"),
        ("--signal", "FOO:0.3"),
        ("--precision", "bfloat16", "--model", "tiny"),  # the tiny model's trl-grpo trains in float32
    ],
)
def test_a_value_a_setting_refuses_is_one_line_before_anything_runs(tmp_path: Path, flag: tuple[str, ...]) -> None:
    run = run_trade("quickstart", "--out", str(tmp_path / "qs"), *flag)
    assert run.code == 2 and run.err.startswith(f"error: {flag[0]} "), run.err
    assert flag[1] in run.err.splitlines()[0], run.err  # the value as typed
    assert len(run.err.strip().splitlines()) == 1, run.err
    assert not (tmp_path / "qs").exists()


@pytest.mark.slow
@needs_extra
def test_the_same_seed_gives_the_same_fine_tuned_model(tmp_path: Path) -> None:
    def weights(out: Path) -> str:
        run = run_trade(
            "quickstart",
            "--out",
            str(out),
            "--stop-after",
            "model",
            "--model",
            "tiny",
            "--days",
            "2",
            "--sft-steps",
            "5",
        )
        assert run.code == 0, run.err
        return hashlib.sha256((out / "model" / "model.safetensors").read_bytes()).hexdigest()

    assert weights(tmp_path / "a") == weights(tmp_path / "b")


@pytest.mark.slow
@needs_extra
def test_a_short_quickstart_runs_end_to_end_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    stopped = run_trade("quickstart", "--out", str(out), "--stop-after", "model", *SHORT, timeout=1800)
    assert stopped.code == 0, stopped.err
    run = run_trade("quickstart", "--out", str(out), *SHORT, timeout=3600)
    assert run.code == 0, run.err
    assert "[3/7] model + tool-call fine-tune: done before" in run.out
    assert f"report: {out / 'report.md'}" in run.out
    report = (out / "report.md").read_text()
    # The three sides stand in one table, each row's reward the one its own evaluation wrote.
    for side in ("trained", "untrained", "momentum", "equal-weight", "hold", "random", "oracle-signal"):
        summary = json.loads((out / "evaluate" / side / "summary.json").read_text())
        reward, share = summary["mean_reward"]["continuous"], summary["exploit_share"]
        cell = "-" if share is None else f"{share:.0%}"
        row = rf"^\| {re.escape(side)} \| {re.escape(f'{reward:+.3f}')} \[[^]]*\] \| {re.escape(cell)}"
        assert re.search(row, report, re.MULTILINE), side
    oracle = json.loads((out / "evaluate" / "oracle-signal" / "summary.json").read_text())
    assert oracle["exploit_share"] == 1.0  # the planted signal's ceiling reads it and buys its top stock
    assert "Data: synthetic, planted signal KMID, IC 0.3 (" in report
    # The learning table is the trainer's metrics.jsonl, and its chart is drawn.
    step = json.loads((out / "grpo" / "metrics.jsonl").read_text().splitlines()[0])
    share = "-" if "trade/exploit_share" not in step else f"{step['trade/exploit_share']:.0%}"
    assert (
        f"| 1 | {step['trade/reward/score/mean']:+.3f} | {share} | {step['trade/failure/no_valid_call']:.0%} |"
        in report
    )
    # TRL's clipped ratio stands beside our truncated share (it counts more: issue 39)
    clipped = step["trl/completions/clipped_ratio"]
    assert f"| {step['trade/failure/truncated']:.0%} | {clipped:.0%} | {step['trade/failure/no_stop']:.0%} |" in report
    assert (out / "grpo.png").read_bytes().startswith(b"\x89PNG")
    compared = json.loads((out / "evaluate" / "compare.json").read_text())
    assert f"Trained against untrained (`trade eval compare`): {compared['verdicts'][0]}." in report
    assert f"On the held-out tasks, trained against untrained: {compared['verdicts'][0]}." in report
    days = (out / "backtest" / "trained" / "days.jsonl").read_text().splitlines()
    assert len(days) == 2 and "## Backtest of the first 2 held-out days, " in report  # at most --days of them
    assert "Annualised figures (252 trading days a year) extrapolate 2 days" in report
    page = (out / "report.html").read_text()
    assert "trained" in page and "untrained" in page and "momentum" in page
    assert list(_state(out)["finished"]) == ["market", "tasks", "model", "grpo", "evaluate", "backtest", "report"]
    # Every stage plays the day the model trained on: the tiny recipe's prompt set and the quickstart's two tools.
    for played in (
        "grpo/rollouts/trajectories/1.jsonl",
        "evaluate/trained/trajectories.jsonl",
        "backtest/trained/trajectories.jsonl",
        "backtest/untrained/trajectories.jsonl",
    ):
        settings = json.loads((out / played).read_text().splitlines()[0])["episode"]["settings"]
        assert (settings["prompt_set"], settings["tools"]) == ("compact", ["compute_alpha_factor", "TakeAction"])
