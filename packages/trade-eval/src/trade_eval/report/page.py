"""One self-contained HTML page over one or more run folders, with its charts written beside it as PNGs.

The page makes no request anywhere: its CSS is inline and its charts are data URIs. Every text a model or
tool wrote is escaped by Jinja2's autoescaping (a reply may contain anything, ``<script>`` included).
Several runs are compared on the dates they all have; each run's own days, trades and conversations follow.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from trade_core.files import atomic_write
from trade_eval.backtest import INDEX_ROW
from trade_eval.metrics import METRIC_ROWS, NOTE_AFTER, NOTE_LABEL, Conventions, performance, trading_notes
from trade_eval.report.charts import Kind, Line, drawdown_chart, nav_chart
from trade_eval.report.runs import NavSeries, Run, finite
from trade_eval.uncertainty import Bootstrap, intervals
from trade_records.runfolder import DayRecord
from trade_tools.episode import Episode
from trade_tools.text import signed_pct
from trade_tools.trajectory import Message, Trajectory

FEES_NOTE = (
    "NAVs are after commission, stamp duty, transfer fees and slippage (every fill of the policy and the baselines "
    "goes through the Episode's execution rules); the index has no costs."
)

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("trade_eval.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    charts: dict[str, Path]


# -- formatting (Jinja filters) --------------------------------------------------------------------


def cny(value: Any) -> str:
    number = finite(value)
    return "–" if number is None else f"{number:,.2f}"


def pct(value: Any, signed: bool = True) -> str:
    number = finite(value)
    return "–" if number is None else signed_pct(number) if signed else f"{number:.2%}"


def num(value: Any, digits: int = 2) -> str:
    number = finite(value)
    return "–" if number is None else f"{number:,.{digits}f}"


def count(value: Any) -> str:
    return num(value, 0)


def sign(value: Any) -> str:
    """A CSS class for a signed number."""
    number = finite(value)
    return "" if not number else "up" if number > 0 else "down"


def state(record: Any) -> str:
    """How a day or episode ended, in one word: ``failed`` when the policy could not play it, else ``done``,
    ``truncated`` or ``not stopped`` (left without TakeAction(stop), which the Episode records as failed:
    "done · failed" read as a contradiction)."""
    if record.get("status") == "failed":
        return "failed"
    ended = record.get("episode_status")
    return "done" if ended == "stopped" else "truncated" if ended == "truncated" else "not stopped"


_ENV.filters.update(cny=cny, pct=pct, num=num, count=count, sign=sign, state=state)


# -- the parts of the page -------------------------------------------------------------------------


def _format(value: Any, kind: str) -> str:
    if kind == "text" or isinstance(value, str):
        return "–" if value in (None, "") else str(value)
    return {"pct": pct, "upct": lambda v: pct(v, signed=False), "cny": cny, "count": count}.get(kind, num)(value)


def _cell(row: dict[str, Any], key: str, kind: str) -> str:
    """A metric followed by its confidence interval (``<key>_ci``) when the row has a readable one. The interval
    holds together (a no-break space) and may go under its value: many columns then still fit the page."""
    ci = row.get(f"{key}_ci")
    text = _format(row.get(key), kind)
    if isinstance(ci, list) and len(ci) == 2 and None not in map(finite, ci):
        return f"{text} [{_format(ci[0], kind)},\u00a0{_format(ci[1], kind)}]"
    return text


def metrics_table(rows: Any, conventions: dict[str, Any]) -> dict[str, Any] | None:
    """Metrics with one column per portfolio and one row per metric (known ones first, then other numbers), and
    under the total return a note for a portfolio that never traded or whose every call failed."""
    if not isinstance(rows, dict) or not rows:
        return None
    rows = {str(name): row for name, row in rows.items() if isinstance(row, dict)}
    fill = {"n": conventions.get("trading_days_per_year", "?"), "rf": pct(conventions.get("risk_free"), signed=False)}
    known = {key for key, _, _ in METRIC_ROWS}
    others = sorted({k for row in rows.values() for k, v in row.items() if k not in known and finite(v) is not None})
    spec = [*METRIC_ROWS, *((key, key.replace("_", " "), "num") for key in others)]
    present = {key for row in rows.values() for key in row}
    notes = trading_notes(rows)
    cells = []
    for key, label, kind in spec:
        if key in present:
            cells.append((label.format(**fill), [_cell(row, key, kind) for row in rows.values()]))
        if key == NOTE_AFTER and notes:
            cells.append((NOTE_LABEL, [note or "–" for note in notes]))
    return {"names": list(rows), "rows": cells}


def conventions_lines(conventions: dict[str, Any]) -> list[str]:
    """The conventions as lines a reader can check the numbers against."""
    names = {
        "trading_days_per_year": "trading days per year",
        "risk_free": "risk-free rate (annual)",
        "ci": "intervals [lo, hi]",
    }
    lines = []
    for key, value in conventions.items():
        shown = pct(value, signed=False) if key == "risk_free" and finite(value) is not None else value
        lines.append(f"{names.get(key, key.replace('_', ' '))}: {shown}")
    return [*lines, FEES_NOTE]


def _conventions(run: Run) -> dict[str, Any]:
    return run.summary.conventions if run.summary else {}


ONE_LINE = 120
"""Tool-call arguments up to this many characters stay on one line."""


def _arguments(text: str) -> tuple[str, bool]:
    """Tool-call arguments for reading (long ones indented), and whether they are valid JSON (else as written)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text, False
    line = json.dumps(value, ensure_ascii=False)
    return (line if len(line) <= ONE_LINE else json.dumps(value, ensure_ascii=False, indent=1)), True


def message_view(message: Message, reveal: Callable[[str], str] = str) -> dict[str, Any]:
    """A message for the page; ``reveal`` puts real symbols and dates back into what an anonymized model read."""
    view = message.model_dump(include={"role", "content", "reasoning_content", "name", "tool_call_id"})
    for key in ("content", "reasoning_content"):
        if view.get(key):
            view[key] = reveal(view[key])
    view["calls"] = []
    for call in message.tool_calls or ():
        arguments, valid = _arguments(reveal(call.function.arguments))
        view["calls"].append({"id": call.id, "name": call.function.name, "arguments": arguments, "valid": valid})
    return view


def orders_view(episode: Episode) -> dict[str, Any]:
    """The day's orders: ``fills`` (with costs), ``refused`` (with the Episode's reasons) and the stop's
    ``summary``, with real symbols and dates where the model read aliases; a refused order's ``amount`` in real
    shares (the whole lots the ``units`` it typed are worth, when anonymized)."""
    reveal, fills, refused, summary = episode.reveal, [], [], ""
    for action in episode.actions:
        if action.type == "stop":
            summary = reveal(action.reasoning)
        elif action.fill is not None:
            fills.append({**action.fill.model_dump(), "reasoning": reveal(action.reasoning)})
        else:
            order = action.model_dump(include={"type", "symbol", "amount", "reason", "reasoning"})
            refused.append({key: reveal(v) if isinstance(v, str) else v for key, v in order.items()})
            if episode.aliases and action.amount is not None and action.amount > 0:  # typed in units: real shares
                symbol = (action.symbol or "").strip().upper()
                shares = episode.aliases.shares(action.amount, symbol, sellable=0, rules=episode.rules)
                refused[-1] |= {"amount": shares, "units": action.amount}
    return {"fills": fills, "refused": refused, "summary": summary}


def day_view(run: Run, day: DayRecord, previous_nav: float | None) -> dict[str, Any]:
    """A DayRecord with its trajectory's orders (fills with their fees, refusals with their reasons), the
    positions it closed with and the conversation."""
    trajectory: Trajectory | None = run.trajectory(day)
    view: dict[str, Any] = {
        **day.model_dump(mode="json"),
        "day_return": day.nav / previous_nav - 1 if previous_nav else None,
        "flagged": day.status != "done" or day.episode_status != "stopped",
        "positions": [{"symbol": s, "shares": n, "cost": day.cost.get(s)} for s, n in sorted(day.holdings.items())],
        "fills": [],
        "refused": [],
        "summary": "",
        "messages": [],
        "recorded": trajectory is not None,
        "anonymized": False,
    }
    if trajectory is not None:
        view.update(orders_view(trajectory.episode))
        view["messages"] = [message_view(m, trajectory.episode.reveal) for m in trajectory.messages]
        view["anonymized"] = trajectory.episode.aliases is not None
    return view


def run_view(run: Run) -> dict[str, Any]:
    previous = finite(run.setting("initial_cash", (int, float)))
    days = []
    for day in run.days:
        days.append(day_view(run, day, previous))
        previous = day.nav
    conventions = _conventions(run)
    return {
        "name": run.name,
        "path": str(run.path),
        "policy": run.policy,
        "model": run.setting("model", str) or "",
        "data": (run.setting("data", dict) or {}).get("description") or "",
        "base_url": run.setting("base_url", str) or "",
        "manifest_json": json.dumps(run.manifest, ensure_ascii=False, indent=1) if run.manifest else "",
        "planned": len(run.setting("dates", list) or []),
        "finished": run.finished,
        "problems": run.problems,
        "days": days,
        "failed": [d for d in days if d["flagged"]],
        "metrics": metrics_table(run.summary.rows if run.summary else None, conventions),
        "conventions": conventions_lines(conventions),
    }


def comparison(runs: list[Run], lines: list[Line], dates: list[str]) -> dict[str, Any] | None:
    """For several runs: the metrics of every charted line over the common dates (the first is the base), under
    the first conventions a run has, against the CSI300 and against hold where every run shares one."""
    if len(runs) < 2 or len(dates) < 2:
        return None
    found = next((c for run in runs if (c := _conventions(run))), {})
    days, risk_free = found.get("trading_days_per_year"), finite(found.get("risk_free"))
    settings = Conventions(
        convention="qlib" if found.get("convention") == "qlib" else "standard",
        trading_days=days if isinstance(days, int) and days > 0 else None,
        risk_free=risk_free or 0.0,
    )
    complete = {line.label: [float(v) for v in line.values] for line in lines if None not in line.values}
    wanted = {"vs_index": INDEX_ROW, "vs_hold": "hold"}
    benchmarks = {key: complete[name] for key, name in wanted.items() if name in complete}
    bootstrap = Bootstrap()
    rows = {
        label: {**performance(nav, dates, settings, benchmarks), **intervals(nav, settings, benchmarks, bootstrap)}
        for label, nav in complete.items()
    }
    shown = settings.to_json(f"each line from its NAV at the close of {dates[0]}, the first date all runs have")
    shown["ci"] = bootstrap.describe(len(dates) - 1)
    return {"metrics": metrics_table(rows, shown), "conventions": conventions_lines(shown)}


def _kind(run: Run, name: str) -> Kind:
    return "policy" if name == run.policy else "index" if name == INDEX_ROW else "baseline"


def _same_growth(a: Line, b: Line) -> bool:
    return bool(np.allclose(a.growth(), b.growth(), rtol=0, atol=1e-9, equal_nan=True))


def chart_lines(runs: list[Run]) -> tuple[list[Line], list[str]]:
    """The lines to draw and their dates: one run's policy, baselines and index; or, for several runs, each
    policy on the dates all of them have, and each baseline or index series once, named by the runs it comes
    from unless every run has it (runs of one pool and seed share baselines; every run shares the index)."""
    navs: list[tuple[Run, NavSeries]] = [(run, nav) for run in runs if (nav := run.nav()).dates]
    if not navs:
        return [], []
    dates = sorted(set.intersection(*(set(nav.dates) for _, nav in navs)))
    order = {"policy": 0, "baseline": 1, "index": 2}
    candidates = [
        (run.name, Line(name, dates, values, _kind(run, name)))
        for run, nav in navs
        for name, values in nav.on(dates).values.items()
    ]
    kept: list[tuple[Line, list[str]]] = []
    for owner, line in sorted(candidates, key=lambda c: order[c[1].kind]):
        same = next((owners for other, owners in kept if _same_growth(other, line)), None)
        if line.kind != "policy" and same is not None:
            same.append(owner)  # a policy of another run, or the same baseline or index again
        else:
            kept.append((line, [owner]))
    if len(navs) == 1:
        return [line for line, _ in kept], dates
    return [
        replace(
            line,
            label=f"{owners[0]} ({line.label})"
            if line.kind == "policy"
            else line.label
            if len(set(owners)) == len(navs)
            else f"{line.label} ({', '.join(owners)})",
        )
        for line, owners in kept
    ], dates


def render(runs: list[Run], lines: list[Line], dates: list[str], charts: dict[str, bytes]) -> str:
    """The page's HTML."""
    images = {name: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for name, png in charts.items()}
    return _ENV.get_template("report.html.j2").render(
        runs=[run_view(run) for run in runs],
        charts=images,
        common=dates,
        comparison=comparison(runs, lines, dates),
        generated=dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    )


def chart_paths(out: Path) -> dict[str, Path]:
    """Where :func:`write_report` puts the charts of the page ``out``."""
    return {name: out.with_name(f"{name}.png") for name in ("nav", "drawdown")}


def write_report(runs: list[Run], out: Path | str) -> ReportFiles:
    """Write the HTML page to ``out`` and nav.png, drawdown.png beside it, each atomically."""
    out = Path(out)
    lines, dates = chart_lines(runs)
    charts = {"nav": nav_chart(lines), "drawdown": drawdown_chart(lines)} if lines else {}
    paths = {name: atomic_write(chart_paths(out)[name], png) for name, png in charts.items()}
    return ReportFiles(atomic_write(out, render(runs, lines, dates, charts)), paths)
