"""`--anonymize` in `trade eval backtest` and `trade eval tasks`: what reaches the server names no real stock and no
date, the orders trade the real stocks, and reports show the real names again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trade_core.testing import run_trade
from trade_eval.runfolder import DAYS, MANIFEST, TRAJECTORIES
from trade_eval.tasks_eval import EPISODES
from trade_eval.testing import STOP, FaultServer, Reply, Request
from trade_reward.tasks import build_tasks
from trade_tools.trajectory import Trajectory

LEAK = re.compile(r"(?i)(?<![a-z0-9])(SH|SZ|BJ)\d{6}|(19|20)\d{2}[-/.]\d{1,2}[-/.]\d{1,2}|\b\d{2}-\d{2}\b")
"""A real code or a calendar date (MM-DD included) in any text the model reads."""
POOL = re.compile(r"股票池（\d+只）：(.+)")


def _alias_trader(request: Request) -> Reply:
    """Reads the first pool alias from the user message, then: every data tool on it, a one-lot buy, stop."""
    user = next(m["content"] for m in request.body["messages"] if m["role"] == "user")
    alias = POOL.search(user).group(1).split(", ")[0]
    if request.turn == 0:
        return Reply(calls=(
            ("get_price_data", json.dumps({"symbol": alias, "period": "10d", "indicators": ["MA", "RSI"]})),
            ("compute_alpha_factor", json.dumps({"symbol": alias, "factor": "ROC5"})),
            ("get_macro_indicators", "{}"),
        ))  # fmt: skip
    if request.turn == 1:
        order = {"type": "buy", "symbol": alias, "amount": 100, "reasoning": f"买入{alias}"}
        return Reply(calls=(("TakeAction", json.dumps(order, ensure_ascii=False)),))
    return STOP


def _no_leak(server: FaultServer) -> None:
    assert len(server.requests) >= 3
    for body in server.requests:
        text = json.dumps({"messages": body["messages"], "tools": body.get("tools")}, ensure_ascii=False)
        assert LEAK.search(text) is None, LEAK.search(text)


def _trajectories(out: Path) -> list[Trajectory]:
    return [Trajectory.model_validate_json(line) for line in (out / TRAJECTORIES).read_text().splitlines()]


def test_a_tasks_run_sends_no_real_code_or_date_and_trades_the_real_stock(real_dataset: Path, tmp_path: Path) -> None:
    build_tasks(real_dataset, tmp_path / "tasks", split="test=2025-07-01:2025-07-08", pool_size="6", seed=1)
    out = tmp_path / "anon"
    with FaultServer(_alias_trader) as server:
        done = run_trade("eval", "tasks", "--tasks", str(tmp_path / "tasks"), "--split", "test", "--base-url",
                         server.url, "--model", "m", "--anonymize", "--limit", "2", "--out", str(out))  # fmt: skip
    assert done.code == 0, done.err
    _no_leak(server)
    assert json.loads((out / MANIFEST).read_text())["anonymized"] is True
    for trajectory in _trajectories(out):
        [buy] = [a for a in trajectory.episode.actions if a.type == "buy"]
        assert buy.fill is not None and buy.symbol in trajectory.episode.task.pool
        assert trajectory.episode.reveal(buy.reasoning) == f"买入{buy.symbol}"
    assert all(json.loads(line)["status"] == "done" for line in (out / EPISODES).read_text().splitlines())


def test_a_backtest_sends_no_real_code_or_date_and_its_report_shows_real_names(
    real_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "anon"
    with FaultServer(_alias_trader) as server:
        done = run_trade("eval", "backtest", "--base-url", server.url, "--model", "m", "--start-date", "2025-06-20",
                         "--num-days", "2", "--pool-size", "5", "--data", str(real_dataset), "--anonymize",
                         "--out", str(out))  # fmt: skip
    assert done.code == 0, done.err
    _no_leak(server)
    bought = {a.symbol for t in _trajectories(out) for a in t.episode.actions if a.type == "buy" and a.fill}
    assert bought and all(re.fullmatch(r"S[HZ]\d{6}", s) for s in bought)
    report = run_trade("eval", "report", str(out), "--out", str(out / "report.html"))
    assert report.code == 0, report.err
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Anonymized" in page and all(f"买入{symbol}" in page for symbol in bought)


@pytest.mark.parametrize("policy", ["momentum", "equal-weight"])
def test_an_anonymized_baseline_trades_exactly_as_the_plain_one(
    policy: str, real_dataset: Path, tmp_path: Path
) -> None:
    """Baselines name stocks by what the episode shows, so hiding the names changes none of their orders."""
    navs = {}
    for name, flags in {"plain": [], "anon": ["--anonymize"]}.items():
        done = run_trade("eval", "backtest", "--policy", policy, "--start-date", "2025-06-20", "--num-days", "5",
                         "--data", str(real_dataset), *flags, "--out", str(tmp_path / name))  # fmt: skip
        assert done.code == 0, done.err
        navs[name] = [json.loads(line)["nav"] for line in (tmp_path / name / DAYS).read_text().splitlines()]
    assert navs["anon"] == navs["plain"] and len(set(navs["plain"])) > 1
