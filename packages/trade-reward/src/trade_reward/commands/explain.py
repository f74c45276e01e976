"""``trade reward explain``: run scripted actions through a real Episode and show how the reward came about.

The same path as training: the actions go through ``Episode.call("TakeAction", ...)`` on the dataset,
the ground truth is the task's own (or computed from the data like ``trade data tasks`` does), and the
score comes from the registered scheme, so what is printed is what verl would have logged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trade_core.errors import TradeError
from trade_core.params import settings_from

if TYPE_CHECKING:
    from trade_reward.schemes import RewardScheme
    from trade_tools.episode import Episode, Task
    from trade_tools.grading import GroundTruth
    from trade_tools.portfolio import Fill

CONVENTIONS = (
    "R(p) = sum_k w_k * (V_p(T+k) / V0 - 1) with weights {weights} over the T+1..T+{horizon} closes; "
    "V_p(T+k) = cash + shares x T0 raw close x adjusted growth (dividends and splits are no losses, a suspended "
    "day keeps the last close); V0 = the original portfolio's value at the T0 close for both portfolios, so "
    "commission, stamp duty, transfer fees and slippage count against the agent; r_outcome = r_new - r_orig."
)


def settings_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--set KEY=VALUE`` (repeatable): a setting of the chosen scheme, VALUE read as JSON when it parses."""
    return click.option(
        "--set",
        "assignments",
        multiple=True,
        metavar="KEY=VALUE",
        help="A scheme setting, repeatable; VALUE is JSON if it parses (scale=25, edges=[-0.03,-0.01,0.01,0.03]).",
    )(command)


def scheme_from(name: str, assignments: tuple[str, ...]) -> RewardScheme:
    """The registered scheme ``name`` configured by ``KEY=VALUE`` assignments; bad ones are TradeErrors."""
    from trade_reward.schemes import get_scheme

    return get_scheme(name, **settings_from(assignments, example="scale=25"))


def _read_object(path: Path, index: int | None) -> dict[str, Any]:
    """The JSON object in ``path``: the whole file, or line ``index`` (0-based) of a JSONL file."""
    if not path.is_file():
        raise TradeError(f"{path}: no such task file")
    text = path.read_text(encoding="utf-8")
    where = str(path)
    if index is None:
        try:
            found = json.loads(text)
        except json.JSONDecodeError as error:
            raise TradeError(
                f"{path}: not one JSON object ({error.msg} at line {error.lineno} column {error.colno})",
                hint="for a JSONL file of several tasks pick one with --index N, 0-based",
            ) from None
    else:
        rows = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if not 0 <= index < len(rows):
            raise TradeError(f"{path} has {len(rows)} tasks; --index {index} is out of range", hint="it is 0-based")
        number, line = rows[index]
        where = f"{path}:{number}"
        try:
            found = json.loads(line)
        except json.JSONDecodeError as error:
            raise TradeError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(found, dict):
        raise TradeError(f"{where}: a task is a JSON object, not {type(found).__name__}")
    return found


def load_task(path: Path, index: int | None) -> tuple[Task, GroundTruth | None]:
    """A Task and the ground truth stored with it.

    Either a ``trade data tasks`` JSONL record (``{"task": {...}, "ground_truth": {...}, ...}``) or a bare
    Task object, optionally with a ``ground_truth`` key; the ground truth may be an object or JSON text.
    """
    from pydantic import ValidationError

    from trade_core.errors import error_line
    from trade_tools.episode import Task
    from trade_tools.grading import GroundTruth
    from trade_tools.records import parse

    data = _read_object(path, index)
    try:
        task = Task.model_validate(data["task"] if isinstance(data.get("task"), dict) else data)
    except ValidationError as error:
        raise TradeError(f"{path}: not a task ({error_line(error)})") from None
    stored = data.get("ground_truth")
    if stored is None:
        return task, None
    try:
        truth = parse(GroundTruth, stored)
    except ValidationError as error:
        raise TradeError(f"{path}: ground_truth is not GroundTruth JSON ({error_line(error)})") from None
    return task, truth


def parse_actions(text: str) -> list[dict[str, Any]]:
    """``--actions``: a JSON list of TakeAction argument objects."""
    try:
        actions = json.loads(text)
    except json.JSONDecodeError as error:
        raise TradeError(f"--actions is not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise TradeError("--actions must be a JSON list of objects", hint='e.g. [{"type": "stop"}]')
    return actions


def task_symbols(task: Task) -> list[str]:
    """Every stock the task can end up holding: its pool and its initial holdings."""
    return sorted({*task.pool, *task.holdings})


def play(episode: Episode, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each action as one assistant turn with one TakeAction call, played as training plays a day (its turn
    budget included); what it did, as the agent was told."""
    from trade_tools.day import TradingDay

    day, steps = TradingDay(episode), []
    for arguments in actions:
        before = len(episode.actions)
        [answer] = day.turn("", [("TakeAction", json.dumps(arguments, ensure_ascii=False))])
        record = episode.actions[-1] if len(episode.actions) > before else None
        if record is None:
            result = "error"
        elif record.type == "stop":
            result = "stop"
        else:
            result = "filled" if record.accepted else "refused"
        steps.append(
            {
                "arguments": arguments,
                "result": result,
                "reason": record.reason if record is not None else "",
                "fill": record.fill.model_dump(mode="json") if record is not None and record.fill else None,
                "answer": answer,
            }
        )
    return steps


def _fill_text(fill: Fill) -> str:
    return (
        f"{fill.side} {fill.symbol} {fill.shares} @ {fill.price:.3f} (close {fill.close:.2f}), "
        f"gross {fill.gross:,.2f}, fees {fill.fees:,.2f} (commission {fill.commission:.2f}, stamp duty "
        f"{fill.stamp_duty:.2f}, transfer {fill.transfer_fee:.2f}), slippage {fill.slippage_cost:,.2f}"
    )


def _pct(value: float) -> str:
    return f"{value:+.6f} ({value:+.3%})"


def _holdings(shares: dict[str, int]) -> str:
    return ", ".join(f"{s} {n}" for s, n in sorted(shares.items())) or "none"


def render(report: dict[str, Any], episode: Episode, truth: GroundTruth) -> str:
    """The breakdown as text, in the order a reward is computed."""
    from trade_tools.portfolio import Fill

    task, reward = episode.task, report["reward"]
    dates = [d.isoformat() for d in truth.horizon_dates]
    lines = [
        f"task {task.task_id}  T0 {task.date}  pool {len(task.pool)} stocks  "
        f"ground truth {report['ground_truth_from']}",
        "actions (one TakeAction per turn, executed at the T0 close):",
    ]
    for number, step in enumerate(report["actions"], start=1):
        args = json.dumps(step["arguments"], ensure_ascii=False)
        if step["result"] == "filled":
            detail = "filled: " + _fill_text(Fill.model_validate(step["fill"]))
        elif step["result"] == "refused":
            detail = f"refused: {step['reason']}"
        elif step["result"] == "error":
            detail = f"error (counts as an invalid call): {step['answer']}"
        else:
            detail = "stop"
        lines.append(f"  {number}. {args}\n     {detail}")
    lines += [
        f"status {episode.status}  valid calls {report['valid_calls']}/{episode.tool_calls}  "
        f"costs paid {report['costs_paid']:,.2f} CNY  V0 {episode.value_before:,.2f} CNY",
        f"original: cash {task.cash:,.2f}; {_holdings(task.holdings)}",
        f"final:    cash {episode.cash:,.2f}; {_holdings(episode.final_holdings())}",
        f"forward growth (adjusted close T+k / T0), {', '.join(dates)}:",
    ]
    held = sorted({*task.holdings, *episode.final_holdings()})
    for symbol in held:
        growth = "  ".join(f"{g:.6f}" for g in truth.growth[symbol])
        lines.append(f"  {symbol}  T0 close {truth.close[symbol]:.2f}  {growth}")
    if not held:
        lines.append("  (no stock held before or after: both portfolios are cash)")
    lines.append(f"V(T+k)/V0 - 1 by horizon, weights {'/'.join(f'{w:g}' for w in report['weights'])}:")
    for side, key in (("final", "r_new"), ("original", "r_orig")):
        terms = "  ".join(f"{r:+.4%}" for r in report[side]["returns"])
        lines.append(f"  {side:<8}  {terms}  -> {key}")
    settings = ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in report["scheme_settings"].items())
    lines += [
        f"r_new      {_pct(reward['r_new'])}",
        f"r_orig     {_pct(reward['r_orig'])}",
        f"r_outcome  {_pct(reward['r_outcome'])}",
        f"scheme     {reward['scheme']} ({settings})",
        f"bucket     {'-' if reward['bucket'] is None else reward['bucket']}",
        f"failure    {reward['failure'] or 'none'}",
        f"score      {reward['score']:g}",
        "conventions: " + report["conventions"],
    ]
    return "\n".join(lines)


def breakdown(
    episode: Episode, steps: list[dict[str, Any]], truth: GroundTruth, source: str, scheme: RewardScheme
) -> dict[str, Any]:
    """Score a played episode and gather everything the breakdown shows."""
    from trade_reward.outcome import DEFAULT_WEIGHTS, outcome

    result = outcome(episode, truth, DEFAULT_WEIGHTS)
    reward = scheme.score(result)
    base = episode.value_before
    return {
        "task": episode.task.model_dump(mode="json"),
        "ground_truth": truth.model_dump(mode="json"),
        "ground_truth_from": source,
        "weights": list(DEFAULT_WEIGHTS),
        "actions": steps,
        "status": episode.status,
        "valid_calls": result.valid_calls,
        "value_before": base,
        "costs_paid": episode.costs_paid(),
        "original": {
            "cash": episode.task.cash,
            "holdings": episode.task.holdings,
            "returns": result.path_orig,
        },
        "final": {
            "cash": episode.cash,
            "holdings": episode.final_holdings(),
            "returns": result.path_new,
        },
        "scheme_settings": scheme.settings.model_dump(mode="json"),
        "reward": reward.model_dump(mode="json"),
        "conventions": CONVENTIONS.format(
            weights="/".join(f"{w:g}" for w in DEFAULT_WEIGHTS), horizon=len(truth.horizon_dates)
        ),
    }


@click.command("explain", short_help="Play scripted actions on a task and show the reward breakdown.")
@click.option(
    "--task",
    "task_file",
    required=True,
    type=click.Path(path_type=Path),
    help="A task: a JSON object, or a JSONL file (`trade data tasks`' val.jsonl) with --index.",
)
@click.option("--index", type=int, help="Which line of a JSONL task file (0-based).")
@click.option("--actions", required=True, help='JSON list of TakeAction arguments, e.g. [{"type": "stop"}].')
@click.option("--data", required=True, type=click.Path(path_type=Path), help="Dataset folder the orders execute on.")
@click.option("--scheme", default="bucketed", show_default=True, help="Reward scheme (`trade reward list`).")
@settings_option
@click.option("--json", "as_json", is_flag=True, help="Print the breakdown as JSON.")
def explain_command(
    task_file: Path,
    index: int | None,
    actions: str,
    data: Path,
    scheme: str,
    assignments: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run --actions through a real Episode of the task on --data and explain its reward.

    Prints the fills and refusals, both portfolios' forward returns, r_new, r_orig, r_outcome, the bucket,
    the failure (no_valid_call, truncated, no_stop, invalid_outcome, malformed) and the score. The ground
    truth is the task's `ground_truth` when the file has one, else computed from --data.
    """
    from trade_data.store import MarketStore
    from trade_reward.forward import ground_truth
    from trade_tools.episode import Episode

    chosen = scheme_from(scheme, assignments)
    wanted = parse_actions(actions)
    task, truth = load_task(task_file, index)
    store = MarketStore.load(data)
    episode = Episode.start(task, store)
    steps = play(episode, wanted)
    source = "from the task file"
    if truth is None:
        truth, source = ground_truth(store, task.date, task_symbols(task)), f"computed from {data}"
    report = breakdown(episode, steps, truth, source, chosen)
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        click.echo(render(report, episode, truth))
