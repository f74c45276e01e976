"""``trade eval backtest`` as users run it: real processes, real plugin loading, real kills."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import click
import numpy as np
import pytest

from trade_core.testing import imports_of, run_trade
from trade_eval.commands.backtest import BacktestPlan, RunOptions, backtest_command
from trade_records.runfolder import DAYS, LOCK, MANIFEST, SUMMARY, TRAJECTORIES

WINDOW = ("--start-date", "2025-06-20", "--initial-cash", "1000000")


def _site(policy_site: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(policy_site), os.environ.get("PYTHONPATH", "")])}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("args", [["eval", "--help"], ["eval", "backtest", "--help"], ["eval", "tasks", "--help"]])
def test_help_imports_no_numpy_or_pandas(args: list[str], tmp_path: Path) -> None:
    """``trade eval --help`` imports every subcommand's module: none may import the Episode for a constant."""
    assert imports_of(*args, tmp_path=tmp_path) & {"numpy", "pandas"} == set()


def test_backtest_takes_its_options_as_a_few_typed_groups() -> None:
    """26 options reach the command as the policy's name and four groups: a new option joins a group, not the
    signature, and the groups are what the code below the command is handed."""
    parameters = inspect.signature(backtest_command.callback).parameters  # type: ignore[arg-type]
    assert list(parameters) == ["policy_name", "settings", "plan", "conventions", "run"]
    grouped = set(BacktestPlan.model_fields) | set(RunOptions.model_fields)
    assert grouped < {p.name for p in backtest_command.params}


def test_trade_plugins_lists_the_policies_with_their_packages(policy_site: Path) -> None:
    run = run_trade("plugins", "--json", env=_site(policy_site))
    assert run.code == 0, run.err
    plugins = {p["name"]: p for p in json.loads(run.out)["plugins"]}
    assert plugins["eval"]["hooks"]["trade_register_policies"] == [
        "equal-weight",
        "hold",
        "llm",
        "local",
        "momentum",
        "oracle-signal",
        "random",
    ]
    assert plugins["testpolicy"]["distribution"] == "trade-eval-testpolicy"
    assert plugins["testpolicy"]["hooks"] == {"trade_register_policies": ["test-random"]}


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_nav_series_of_an_uninterrupted_one(
    policy_site: Path, sample_dataset: Path, tmp_path: Path
) -> None:
    """A user's policy (its own package, loaded by name) is SIGKILLed on a seeded random day, then resumed."""
    args = [
        "eval",
        "backtest",
        "--policy",
        "test-random",
        *WINDOW,
        "--num-days",
        "12",
        "--pool-size",
        "10",
        "--seed",
        "7",
        "--data",
        str(sample_dataset),
    ]
    whole = run_trade(*args, "--out", str(tmp_path / "whole"), env=_site(policy_site), cwd=tmp_path)
    assert whole.code == 0, whole.err
    dates = json.loads((tmp_path / "whole" / MANIFEST).read_text())["dates"]
    kill_at = int(np.random.default_rng(12).integers(1, len(dates)))
    out = tmp_path / "killed"
    killed = run_trade(*args, "--out", str(out), env={**_site(policy_site), "TRADE_TEST_KILL_DATE": dates[kill_at]})
    assert killed.code == -9 and not (out / SUMMARY).exists()
    assert [d["date"] for d in _lines(out / DAYS)] == dates[:kill_at]
    resumed = run_trade(*args, "--out", str(out), "--resume", env=_site(policy_site))
    assert resumed.code == 0, resumed.err
    expected = _lines(tmp_path / "whole" / DAYS)
    assert [d["nav"] for d in _lines(out / DAYS)] == [d["nav"] for d in expected]
    assert [d["holdings"] for d in _lines(out / DAYS)] == [d["holdings"] for d in expected]
    assert [t["id"] for t in _lines(out / TRAJECTORIES)] == [d["trajectory_id"] for d in _lines(out / DAYS)]
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["versions"]["trade-eval-testpolicy"] == "0.1.0" and manifest["policy"] == "test-random"
    assert "test-random" in resumed.out and "CSI300" in resumed.out


def test_a_second_writer_of_a_run_folder_is_refused_and_a_dead_writers_lock_is_taken_over(
    sample_dataset: Path, tmp_path: Path, lock_holder
) -> None:
    """Two writers of one --out (a --resume while the run still goes) appended their lines among each other's."""
    out = tmp_path / "run"
    args = ["eval", "backtest", "--policy", "hold", *WINDOW, "--num-days", "2", "--data", str(sample_dataset)]
    args += ["--pool-size", "5", "--out", str(out)]
    with lock_holder(out) as holder:
        refused = run_trade(*args)
        assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1, refused.err
        assert refused.err.startswith(f"error: {out} is being written by process {holder.pid} (wait for it")
        assert sorted(p.name for p in out.iterdir()) == [LOCK]
    assert not out.exists()  # released: the lock file gone, with the folder its holder made
    with lock_holder(out, die=True) as dead:
        assert (out / LOCK).read_text().strip() == str(dead.pid)
        taken = run_trade(*args)
    assert taken.code == 0, taken.err
    assert len(_lines(out / DAYS)) == 2 and not (out / LOCK).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "error: unknown policy 'nope' (valid: equal-weight, hold, llm, local, momentum, "),
        (["--policy", "llm", "--model", "m"], "error: policy 'llm' needs a served model (pass --base-url URL"),
        (["--policy", "hold", "--start-date", "2026-01-05"], "error: --start-date 2026-01-05 is outside the data"),
        (
            ["--policy", "hold", "--start-date", "2025-12-01", "--num-days", "60"],
            "error: --num-days 60 from 2025-12-01 runs past the data's last day 2025-12-31 (at most 23 trading days",
        ),
        (["--policy", "hold", "--pool-size", "5", "--pool-file", "x.txt"], "error: --pool-size and --pool-file"),
        (
            ["--policy", "hold", "--pool-file", "pool.txt"],
            "error: 1 pool symbols are not stocks listed by 2025-06-20: SH000300",
        ),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, sample_dataset: Path, tmp_path: Path) -> None:
    args = ["--start-date", "2025-06-20", *args] if "--start-date" not in args else args
    (tmp_path / "pool.txt").write_text("SH000300, SH600519\n")
    run = run_trade("eval", "backtest", "--data", str(sample_dataset), *args, cwd=tmp_path)
    assert run.code == 2 and run.err.startswith(message) and len(run.err.strip().splitlines()) == 1, run.err
    assert not (tmp_path / "runs").exists()


def test_the_table_prints_the_conventions_beside_the_metrics(sample_dataset: Path, tmp_path: Path) -> None:
    run = run_trade(
        "eval",
        "backtest",
        "--policy",
        "momentum",
        *WINDOW,
        "--num-days",
        "5",
        "--data",
        str(sample_dataset),
        "--convention",
        "qlib",
        "--risk-free",
        "0.015",
        cwd=tmp_path,
    )
    assert run.code == 0, run.err
    assert "annualised over 238 trading days a year (qlib: returns summed, as Qlib); risk-free 1.50%/yr" in run.out
    header = next(line for line in run.out.splitlines() if line.startswith("metric"))
    assert header.split() == ["metric", "momentum", "hold", "equal-weight", "CSI300"]
    assert "Sharpe (238 d/yr, rf 1.50%)" in run.out
    assert "volatility (238 d/yr, ddof=1)" in run.out and "std of daily returns (ddof=1)" in run.out
    [folder] = (tmp_path / "runs").iterdir()
    assert folder.name == "momentum-2025-06-20-5d-seed0"


def test_the_run_commands_share_their_options_with_the_settings_defaults() -> None:
    """`trade eval backtest` and `trade eval tasks` offer the policy, sampling and guard options once (the run-command
    layer), each with the default RunSettings gives the run."""
    from trade_eval.commands.backtest import backtest_command
    from trade_eval.commands.tasks import tasks_command
    from trade_eval.settings import RunSettings

    def shared(command: click.Command) -> dict[str, object]:
        return {p.name: p.default for p in command.params if p.name in RunSettings.model_fields or p.name in GUARD}

    GUARD = {"policy_name", "model_cutoff", "anonymize", "anonymize_noise"}
    backtest, tasks = shared(backtest_command), shared(tasks_command)
    assert tasks == {k: v for k, v in backtest.items() if k != "base_url"} and len(tasks) == 13
    defaults = RunSettings()
    assert all(tasks[name] == getattr(defaults, name) for name in tasks.keys() - GUARD - {"options", "api_key"})
