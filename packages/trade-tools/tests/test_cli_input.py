"""What a new user types at the CLI: dates, universes, amounts and piped input run as meant or fail in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trade_core.cli import build_cli
from trade_core.plugins import get_manager
from trade_core.testing import run_trade


def _trade(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(get_manager()), list(args))
    return result.exit_code, result.output


def _one_line_error(code: int, output: str, message: str) -> None:
    assert code == 2 and output == f"error: {message}\n", output


@pytest.mark.parametrize(
    "text",
    [
        "01/02/2024",
        "20240614",
        "14/06/2024",
        "June 14 2024",
        "2024-06-14T15:00",
        "2024-6-14",
        "2024-02-30",
        "２０２４-06-14",
    ],
)
def test_a_date_is_yyyy_mm_dd_only(sample_dataset: Path, text: str) -> None:
    code, output = _trade("tools", "call", "get_macro_indicators", "--data", str(sample_dataset), "--date", text)
    _one_line_error(code, output, f"--date {text!r} is not a date YYYY-MM-DD (e.g. 2024-06-14)")


@pytest.mark.parametrize(
    "args",
    [
        ["tools", "play", "--data", "Q", "--date"],
        ["data", "synth", "--symbols", "10", "--end", "2024-12-31", "--out", "S", "--start"],
        ["data", "synth", "--symbols", "10", "--out", "S", "--end"],
        ["data", "download", "--source", "baostock", "--out", "D", "--start"],
        ["data", "download", "--source", "baostock", "--out", "D", "--end"],
    ],
)
def test_every_date_option_takes_yyyy_mm_dd_only(args: list[str], tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    code, output = _trade(*args, "20240614")
    _one_line_error(code, output, f"{args[-1]} '20240614' is not a date YYYY-MM-DD (e.g. 2024-06-14)")
    assert not list(tmp_path.iterdir())  # refused before anything is written


@pytest.mark.parametrize("pool", [[], ["--pool", "SH600519"]], ids=["sampled", "given"])
def test_an_unknown_universe_is_refused(sample_dataset: Path, pool: list[str]) -> None:
    code, output = _trade(
        "tools",
        "call",
        "get_macro_indicators",
        "--data",
        str(sample_dataset),
        "--date",
        "2024-06-14",
        "--universe",
        "csi500",
        *pool,
    )
    _one_line_error(code, output, "unknown universe 'csi500' (known: all, csi300)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cash", "-5"], "--cash -5.0 is not between 0 and 1,000,000,000,000 CNY (e.g. --cash 1000000)"),
        (["--cash", "nan"], "--cash nan is not between 0 and 1,000,000,000,000 CNY (e.g. --cash 1000000)"),
        (["--cash", "inf"], "--cash inf is not between 0 and 1,000,000,000,000 CNY (e.g. --cash 1000000)"),
        (
            ["--cash", "1e13"],
            "--cash 10000000000000.0 is not between 0 and 1,000,000,000,000 CNY (e.g. --cash 1000000)",
        ),
        (
            ["--pool", "SZ000001", "--holdings", "SZ000001=1000000000000000"],
            "holding 'SZ000001=1000000000000000' is more than 1,000,000,000,000 shares, the most a portfolio holds",
        ),
        (["--pool", ","], "the stock pool is empty (e.g. --pool SH600519,SZ000001)"),
    ],
)
def test_bad_account_options_are_one_line(sample_dataset: Path, args: list[str], message: str) -> None:
    code, output = _trade("tools", "play", "--data", str(sample_dataset), "--date", "2024-06-14", *args)
    _one_line_error(code, output, message)


def test_a_negative_seed_is_a_usage_error(sample_dataset: Path) -> None:
    code, output = _trade(
        "tools", "call", "get_macro_indicators", "--data", str(sample_dataset), "--date", "2024-06-14", "--seed", "-1"
    )
    assert code == 2 and "Invalid value for '--seed': -1 is not in the range x>=0" in output


def test_anonymize_noise_perturbs_an_anonymized_day_only(sample_dataset: Path) -> None:
    """--anonymize-noise without --anonymize is a one-line usage error; with it the T0 bar reads perturbed (its
    close exact: orders trade there), and a noise past the limit is refused."""
    call = ("tools", "call", "get_price_data", "--data", str(sample_dataset), "--date", "2024-06-14", "--pool")
    code, output = _trade(*call, "SH600519", "--args", '{"symbol": "SH600519"}', "--anonymize-noise", "0.01")
    assert code == 2 and "--anonymize-noise perturbs what an anonymized episode shows: add --anonymize" in output
    code, output = _trade(*call, "SH600519", "--anonymize", "--anonymize-noise", "0.5")
    assert code == 2 and "0.5 is not in the range 0<=x<=0.1" in output
    bars = []
    for noise in ("0", "0.01"):
        code, output = _trade(*call, "SH600519", "--anonymize", "--anonymize-noise", noise, "--args", '{"symbol": "X"}')
        assert code == 1, output  # the alias is not known before the day: the error lists the pool
        alias = output.split("：")[-1].strip()
        args = json.dumps({"symbol": alias})
        code, output = _trade(*call, "SH600519", "--anonymize", "--anonymize-noise", noise, "--args", args)
        assert code == 0, output
        bars.append(output.split("最新：")[1].split(" 涨跌")[0].split())
    assert bars[0][4] == bars[1][4] and bars[0][1:4] != bars[1][1:4], bars  # 收 the same; 开高低 perturbed


def _play(sample_dataset: Path, out: Path, script: str):  # type: ignore[no-untyped-def]
    return run_trade(
        "tools",
        "play",
        "--data",
        str(sample_dataset),
        "--date",
        "2024-06-14",
        "--pool",
        "SZ000063,SH600519",
        "--holdings",
        "",
        "--save",
        str(out),
        input=script,
    )


def test_end_of_input_saves_the_day_as_quit_does(sample_dataset: Path, tmp_path: Path) -> None:
    run = _play(sample_dataset, tmp_path / "q.jsonl", "buy SZ000063 100\n")
    assert run.code == 1 and "Aborted!" not in run.err  # left without `stop`, as after `quit`
    assert "成交：买入SZ000063 100股" in run.out and "状态：open" in run.out
    assert "\nend of input: leaving as `quit` does\n" in run.out
    [line] = (tmp_path / "q.jsonl").read_text().splitlines()
    episode = json.loads(line)["episode"]
    assert episode["status"] == "open" and episode["positions"]["SZ000063"]["shares"] == 100


def test_commands_after_stop_are_answered(sample_dataset: Path, tmp_path: Path) -> None:
    run = _play(sample_dataset, tmp_path / "q.jsonl", "stop 收工\nbuy SZ000063 100\nstate\nquit\nstate\n")
    assert run.code == 0, run.err
    answers = run.out[run.out.index("已结束今日交易") :].splitlines()
    assert answers[1] == "错误：本交易日已结束（已停止），不能再调用工具"
    assert answers[2] == "现金 1,000,000.00；持仓 空仓；组合总值 1,000,000.00"
    assert run.out.count("现金 1,000,000.00；") == 1  # nothing after `quit`
    assert "the day is over (stopped)" in run.err and "end of input:" not in run.out
    [line] = (tmp_path / "q.jsonl").read_text().splitlines()
    trajectory = json.loads(line)
    assert trajectory["episode"]["status"] == "stopped" and trajectory["episode"]["actions"][0]["type"] == "stop"
    assert trajectory["messages"][-1]["content"] == answers[1]  # the answer is part of the record


def test_saving_into_a_folder_is_refused_before_the_day_is_played(sample_dataset: Path, tmp_path: Path) -> None:
    run = _play(sample_dataset, tmp_path, "stop\n")
    assert run.code == 2 and "is a directory" in run.err, run.err
    assert "=====" not in run.out  # no prompt shown, no day played and lost
