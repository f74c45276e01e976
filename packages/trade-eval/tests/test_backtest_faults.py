"""`trade eval backtest --policy llm` against the fault-injecting server: every day is accounted for."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_eval.testing import LOOP, STOP, Drop, Fail, FaultServer, Reply, by_day, served_backtest

MARKUP = '<tool_call>\n{"name": "TakeAction", "arguments": {"type": "stop"}}\n</tool_call>'
PLAN = {
    "2025-06-20": [Fail(500), STOP],  # retried, then stopped
    "2025-06-23": [Fail(503)] * 3,  # the server stays down: failed after --retries 2, portfolio held
    "2025-06-24": [Reply(calls=(("TakeAction", '{"type": "buy", "symbol": '),)), STOP],  # broken call, then stop
    "2025-06-25": [LOOP] * 3,  # never stops: truncated at --max-turns 3
    # dropped mid-answer, slower than --request-timeout, then a call the server did not parse
    "2025-06-26": [Drop(), Reply(calls=STOP.calls, delay=5), Reply(content=MARKUP)],
}


def test_a_backtest_through_every_fault_finishes_and_accounts_for_every_day(
    sample_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    with FaultServer(by_day(PLAN)) as server:
        options = ("--request-timeout", "0.5", "--retries", "2", "--set", "backoff=0.01")
        run = served_backtest(server.url, "trader", sample_dataset, out, days=5, turns=3, options=options)
    assert run.code == 0, run.err
    days = [json.loads(line) for line in (out / "days.jsonl").read_text().splitlines()]
    assert [d["date"] for d in days] == list(PLAN)
    assert [(d["status"], d["episode_status"]) for d in days] == [
        ("done", "stopped"),
        ("failed", "failed"),
        ("done", "stopped"),
        ("done", "truncated"),
        ("done", "failed"),
    ]
    assert [(d["requests"], d["retries"]) for d in days] == [(2, 1), (3, 2), (2, 0), (3, 0), (3, 2)]
    assert days[1]["reason"] == "turn 1: HTTP 503 (internal server error) after 3 attempts"
    assert days[1]["nav"] == days[0]["nav"] and days[1]["holdings"] == days[0]["holdings"]
    assert (days[2]["tool_errors"], days[3]["reason"], days[4]["reason"]) == (
        1,
        "超过3轮仍未停止",
        "回复中没有工具调用",
    )
    assert "tool-call markup" in days[4]["warnings"][0]
    trajectories = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert [t["id"] for t in trajectories] == [d["trajectory_id"] for d in days]
    broken = trajectories[2]["messages"][3]
    assert broken["role"] == "tool" and broken["content"].startswith("错误：")
    summary = json.loads((out / "summary.json").read_text())
    assert {"llm", "hold", "equal-weight", "momentum", "CSI300"} <= set(summary["rows"])
    assert summary["rows"]["llm"]["failed_days"] == 1
    assert "failed 1 day(s): turn 1: HTTP 503" in run.out


OBJECT_ARGUMENTS = {"type": "function", "function": {"name": "TakeAction", "arguments": {"type": "stop"}}}
SHAPES = {
    "2025-06-20": [Reply(raw_calls=[OBJECT_ARGUMENTS]), STOP],  # arguments as an object, not JSON text
    "2025-06-23": [Reply(raw_calls="TakeAction"), STOP],  # a bare name for the list of calls
}


def test_tool_calls_in_a_broken_shape_are_broken_calls_and_the_day_goes_on(
    sample_dataset: Path, tmp_path: Path
) -> None:
    """They raised in the llm policy, and the whole day was recorded as "policy llm raised ..."."""
    out = tmp_path / "run"
    with FaultServer(by_day(SHAPES)) as server:
        run = served_backtest(server.url, "trader", sample_dataset, out, days=2)
    assert run.code == 0, run.err
    days = [json.loads(line) for line in (out / "days.jsonl").read_text().splitlines()]
    assert [(d["status"], d["episode_status"], d["tool_calls"], d["tool_errors"]) for d in days] == [
        ("done", "stopped", 2, 1)
    ] * 2
    assert all("turn 1: tool call 0 is not in OpenAI's shape" in d["warnings"][0] for d in days)
    trajectories = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    answers = [t["messages"][3]["content"] for t in trajectories]
    assert answers[0].startswith("错误：参数必须是JSON对象") and answers[1].startswith("错误：未知工具")
    replayed = [r["messages"][2]["tool_calls"][0]["function"] for r in server.requests if len(r["messages"]) > 2]
    assert [call["name"] for call in replayed] == ["TakeAction", '"TakeAction"']
    assert all(isinstance(call["arguments"], str) for call in replayed)


def closed_port() -> int:
    """A port nothing listens on (free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("not_a_url", [True, False], ids=["not a URL", "nothing listening"])
def test_a_server_that_does_not_answer_is_refused_before_the_first_day(
    not_a_url: bool, sample_dataset: Path, tmp_path: Path
) -> None:
    """Every day was retried, recorded failed, and the run exited 0."""
    url = "not-a-url" if not_a_url else f"http://127.0.0.1:{closed_port()}/v1"
    args = ["--base-url", url, "--model", "trader", "--data", str(sample_dataset), "--start-date", "2025-06-20"]
    run = run_trade("eval", "backtest", *args, "--num-days", "3", "--retries", "0", cwd=tmp_path)
    assert run.code == 2 and len(run.err.strip().splitlines()) == 1, run.err
    problem = "--base-url 'not-a-url' is not an http(s) URL" if not_a_url else f"no server answers at {url} ("
    assert run.err.startswith(f"error: {problem}") and "(start one (`trade eval serve MODEL_DIR --run`)" in run.err
    assert not (tmp_path / "runs").exists()


def test_a_run_in_which_every_day_failed_exits_non_zero(sample_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FaultServer(default=Fail(503)) as server:
        args = ["--base-url", server.url, "--model", "trader", "--data", str(sample_dataset), "--out", str(out)]
        run = run_trade("eval", "backtest", *args, "--start-date", "2025-06-20", "--num-days", "2", "--retries", "0")
    assert run.code == 2 and run.err.strip().splitlines()[-1].startswith(f"error: all 2 days of {out} failed")
    assert "failed 2 day(s): turn 1: HTTP 503 (internal server error) after 1 attempts" in run.out
    assert len((out / "days.jsonl").read_text().splitlines()) == 2 and (out / "summary.json").is_file()
