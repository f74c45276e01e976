"""What each page shows, as plain dicts for the templates: the run list with headline numbers, a run's days or
episodes (filtered, a page at a time), a training run's steps, one day with its conversation and orders, and
two runs side by side."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from trade_core.errors import error_line
from trade_eval.backtest import INDEX_ROW
from trade_eval.dashboard.records import Line
from trade_eval.dashboard.state import RunState
from trade_eval.metrics import trading, trading_note
from trade_eval.report.page import conventions_lines, message_view, metrics_table, orders_view, pct
from trade_eval.report.runs import finite
from trade_records.metrics import MetricsLine, Played, StepMetrics
from trade_records.runfolder import MANIFESTS, BacktestSummary, TasksSummary
from trade_tools.grading import Reward
from trade_tools.trajectory import Trajectory

PAGE = 200
"""Rows of a run's table per page."""
FILTERS = {"all": "every row", "losing": "losing days", "failed": "failed or not stopped", "errors": "tool errors"}


def _flagged(value: dict[str, Any]) -> bool:
    return value.get("status") != "done" or value.get("episode_status") != "stopped"


def _reason(value: dict[str, Any]) -> str:
    rewards = value.get("rewards")
    first = next(iter(rewards.values()), None) if isinstance(rewards, dict) and rewards else None
    failure = first.get("failure") if isinstance(first, dict) else None
    return str(value.get("reason") or failure or "")


def backtest_rows(state: RunState, initial_cash: float | None) -> list[dict[str, Any]]:
    """Each line of days.jsonl with its day return (from the previous readable day's NAV)."""
    rows, previous = [], initial_cash
    for line in state.records():
        row = row_of(line)
        nav = finite(row.get("nav"))
        row["day_return"] = nav / previous - 1 if nav is not None and previous else None
        previous = nav if nav is not None else previous
        rows.append(row)
    return rows


def row_of(line: Line) -> dict[str, Any]:
    value = line.value or {}
    holdings = value.get("holdings") if isinstance(value.get("holdings"), dict) else {}
    return {
        **value,
        "n": line.number,
        "problem": line.problem,
        "flagged": line.value is not None and _flagged(value),
        "why": _reason(value),
        "holdings": holdings,
        "scores": {k: v.get("score") for k, v in (value.get("rewards") or {}).items() if isinstance(v, dict)},
    }


def select(rows: list[dict[str, Any]], show: str, reason: str, symbol: str, state: RunState) -> list[dict[str, Any]]:
    """The rows a filter keeps; a broken line is kept whatever the filter (it is an error to see)."""
    if show == "losing":
        rows = [r for r in rows if r["problem"] or (finite(r.get("day_return")) or 0) < 0 or _score(r) < 0]
    elif show == "failed":
        rows = [r for r in rows if r["problem"] or r["flagged"]]
    elif show == "errors":
        rows = [r for r in rows if r["problem"] or (r.get("tool_errors") or 0) > 0]
    if reason:
        rows = [r for r in rows if r["why"] == reason]
    if symbol:
        rows = [r for r in rows if r["problem"] or _mentions(r, symbol.strip().upper(), state)]
    return rows


def _score(row: dict[str, Any]) -> float:
    scores = [finite(v) for v in row["scores"].values()]
    return next((s for s in scores if s is not None), 0.0)


def _mentions(row: dict[str, Any], symbol: str, state: RunState) -> bool:
    """Held at the close, or named anywhere in the day's trajectory (its line searched as bytes, not parsed)."""
    if symbol in row["holdings"]:
        return True
    index = state.trajectory_index()
    number = index.keys.get(str(row.get("trajectory_id"))) if index else None
    return number is not None and symbol.encode() in index.read(number)


def reasons(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for row in rows:
        if row["why"]:
            counts[row["why"]] = counts.get(row["why"], 0) + 1
    return sorted(counts.items(), key=lambda item: -item[1])


def headline(state: RunState) -> dict[str, Any]:
    """The run list's row: what the run is and its main numbers so far (beside a backtest's return, whether it
    never traded or every call failed, from its days so far)."""
    manifest, summary = state.manifest(), state.summary()
    settings = manifest.value or {}
    row: dict[str, Any] = {
        "name": state.run.name,
        "kind": state.run.kind,
        "policy": settings.get("policy", ""),
        "model": settings.get("model", ""),
        "numbers": [],
        "finished": summary.value is not None,
        "problems": [p for p in (manifest.problem, summary.problem) if p],
    }
    if not state.ready:
        row.update(count="reading…", reading=True)
        return row
    if state.run.kind == "training":
        metrics = _metrics_lines(state)
        steps = state.steps()
        row["count"] = f"{max(len(metrics), len(steps))} steps"
        if metrics:
            last = metrics[-1].metrics
            row["numbers"] = [
                ("reward", _num(last.reward.get("score"))),
                ("stop rate", pct(last.stop_rate, signed=False)),
            ]
        return row
    lines = state.records()
    values = [line.value for line in lines if line.value]
    row["problems"] += [line.problem for line in lines if line.problem][:3]
    if state.run.kind == "tasks":
        row["count"] = f"{len(values)} episodes"
        found: TasksSummary | None = summary.value
        means = found.mean_reward if found else {}
        row["numbers"] = [(f"reward {k}", _num(v)) for k, v in means.items()] + [
            ("stop rate", pct(found.stop_rate if found else None, signed=False))
        ]
        return row
    planned = len(settings.get("dates") or [])
    row["count"] = f"{len(values)}{f' / {planned}' if planned else ''} days"
    cash, nav = finite(settings.get("initial_cash")), finite(values[-1].get("nav")) if values else None
    note = trading_note(trading(values))
    shown = pct(nav / cash - 1 if nav is not None and cash else None)
    row["numbers"] = [("return", f"{shown} — {note}" if note else shown)]
    index = summary.value.rows.get(INDEX_ROW) if summary.value else None
    if index is not None:
        row["numbers"].append((INDEX_ROW, pct(index.get("total_return"))))
    failed, unstopped = (
        sum(v.get("status") == "failed" for v in values),
        sum(v.get("episode_status") != "stopped" for v in values),
    )
    row["numbers"] += [("failed days", str(failed)), ("not ended by stop", str(unstopped))]  # the metrics' counts
    return row


def _num(value: Any) -> str:
    number = finite(value)
    return "–" if number is None else f"{number:+.4f}"


def summary_view(state: RunState) -> dict[str, Any]:
    """A finished backtest's metrics table and conventions, as the report shows them."""
    found: BacktestSummary = state.summary().value
    return {
        "metrics": metrics_table(found.rows, found.conventions),
        "conventions": conventions_lines(found.conventions),
    }


def training_rows(state: RunState) -> list[dict[str, Any]]:
    """One row per step: the trainer's metrics line where there is one, else the same metrics computed from the
    step's records (a trainer that logged elsewhere: verl's loggers)."""
    metrics = {m.step: m.metrics for m in _metrics_lines(state)}
    steps = state.steps()
    return [
        {
            "step": step,
            "has_records": step in steps,
            "derived": step not in metrics,
            **_step_numbers(metrics[step] if step in metrics else StepMetrics.of(_played(state, step))),
        }
        for step in sorted(set(metrics) | set(steps))
    ]


def _metrics_lines(state: RunState) -> list[MetricsLine]:
    return [m for line in state.metrics() if line.value and (m := MetricsLine.from_flat(line.value))]


def _step_numbers(metrics: StepMetrics | None) -> dict[str, Any]:
    if metrics is None:
        return {"rewards": {}, "trajectories": None, "stop_rate": None, "tool_error_rate": None, "zero_variance": None}
    return {
        "rewards": metrics.reward,
        "trajectories": metrics.trajectories,
        "stop_rate": metrics.stop_rate,
        "tool_error_rate": metrics.tool_error_rate,
        "zero_variance": metrics.zero_variance_groups,
    }


def _step_lines(state: RunState, step: int) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """A training step's trajectory lines, each parsed alone: (number, value, problem)."""
    index = state.trajectory_index(step)
    for number in range(len(index) if index else 0):
        try:
            yield number, json.loads(index.read(number)), ""  # type: ignore[union-attr]
        except ValueError as error:
            yield number, None, f"line {number + 1}: not JSON ({error.__class__.__name__})"


def _played(state: RunState, step: int) -> list[Played]:
    """What the step's metrics read of each scored trajectory (lines that are not one left out)."""
    played = []
    for _, value, _ in _step_lines(state, step):
        episode = (value or {}).get("episode") or {}
        try:
            reward = Reward.model_validate((value or {}).get("reward"))
            actions = episode.get("actions") or []
            trades = sum(bool(a.get("accepted")) and a.get("type") in ("buy", "sell") for a in actions)
            counts = [int(episode.get(key) or 0) for key in ("turns", "tool_calls", "tool_errors")]
            played.append(Played(str(value.get("task_id")), reward, str(episode.get("status")), *counts, trades))
        except (ValidationError, AttributeError, TypeError, ValueError):
            continue
    return played


def step_rows(state: RunState, step: int) -> list[dict[str, Any]]:
    """A training step's trajectories, each from its own line."""
    rows = []
    for number, value, problem in _step_lines(state, step):
        if value is None:
            rows.append({"n": number, "problem": problem})
            continue
        episode, reward = value.get("episode") or {}, value.get("reward") or {}
        rows.append(
            {
                "n": number,
                "problem": "",
                "task_id": value.get("task_id"),
                "score": reward.get("score"),
                "failure": reward.get("failure"),
                "status": episode.get("status"),
                "reason": episode.get("status_reason"),
                "tool_calls": episode.get("tool_calls"),
                "tool_errors": episode.get("tool_errors"),
                "turns": episode.get("turns"),
            }
        )
    return rows


def record_of(state: RunState, number: int) -> tuple[dict[str, Any] | None, str]:
    """A day's (or episode's) record, validated, or what is wrong with its line."""
    lines, manifest = state.records(), MANIFESTS[state.run.kind]
    if not 0 <= number < len(lines):
        return None, f"no line {number + 1} in {manifest.RECORDS}"
    line = lines[number]
    if line.value is None:
        return None, line.problem
    model = manifest.RECORD
    try:
        return model.model_validate(line.value).model_dump(mode="json"), ""
    except ValidationError as error:
        return None, f"line {number + 1}: not a {model.__name__} ({error_line(error)})"


def trajectory_view(trajectory: Trajectory) -> dict[str, Any]:
    """The orders (fills with costs, refusals with the Episode's reasons), the portfolio before and after, the
    reward breakdown and the conversation, with real symbols and dates where the model read aliases."""
    episode = trajectory.episode
    task = episode.task
    before = [{"symbol": s, "shares": n, "cost": task.cost_basis.get(s)} for s, n in sorted(task.holdings.items())]
    after = [
        {"symbol": s, "shares": p.shares, "cost": p.cost} for s, p in sorted(episode.positions.items()) if p.shares
    ]
    return {
        "id": trajectory.id,
        "task_id": trajectory.task_id,
        "source": trajectory.source,
        "step": trajectory.step,
        "date": str(task.date),
        "status": episode.status,
        "status_reason": episode.status_reason,
        **orders_view(episode),
        "before": {"cash": task.cash, "positions": before, "value": episode.value_before},
        "after": {"cash": episode.cash, "positions": after},
        "reward": trajectory.reward.model_dump(mode="json") if trajectory.reward else None,
        "messages": [message_view(m, episode.reveal) for m in trajectory.messages],
        "anonymized": episode.aliases is not None,
        "tool_calls": episode.tool_calls,
        "tool_errors": episode.tool_errors,
        "turns": episode.turns,
    }


def side_by_side(a: RunState, b: RunState) -> dict[str, Any]:
    """Two runs' rows paired on the same day (backtests) or the same task and sample (tasks runs)."""

    def keyed(state: RunState) -> dict[str, dict[str, Any]]:
        cash = finite((state.manifest().value or {}).get("initial_cash"))
        rows = (
            backtest_rows(state, cash) if state.run.kind == "backtest" else [row_of(line) for line in state.records()]
        )
        return {_pair_key(r): r for r in rows if not r["problem"]}

    left, right = keyed(a), keyed(b)
    common = sorted(set(left) & set(right))
    return {
        "a": a.run.name,
        "b": b.run.name,
        "pairs": [(key, left[key], right[key]) for key in common],
        "only_a": len(left) - len(common),
        "only_b": len(right) - len(common),
    }


def _pair_key(row: dict[str, Any]) -> str:
    if "task_id" in row:
        return f"{row.get('date')} {row.get('task_id')} #{row.get('sample')}"
    return str(row.get("date"))
