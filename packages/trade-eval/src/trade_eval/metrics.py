"""Performance metrics of NAV series, each with the convention it was computed under.

Daily returns are ``NAV_t / NAV_{t-1} - 1`` from the base close (NAV = initial cash) on. Two conventions:

- ``standard`` (default): geometric. Annualised return ``(NAV_end / NAV_base) ** (N / days) - 1``, maximum
  drawdown of the NAV from its running peak (the base included), volatility ``std(r) * sqrt(N)``, Sharpe
  ``mean(r - rf_daily) / std(r) * sqrt(N)`` with ``rf_daily = (1 + rf) ** (1 / N) - 1``.
- ``qlib``: Qlib's ``qlib.contrib.evaluate.risk_analysis(r, N, mode="sum")`` exactly: returns summed, not
  compounded. Annualised return ``mean(r) * N``, maximum drawdown of ``cumsum(r)`` from its running peak,
  Sharpe ``(mean(r) - rf / N) / std(r) * sqrt(N)`` (Qlib's ``information_ratio`` when rf = 0). N defaults to 238.

Both use ``std`` with ddof=1; the total return is always ``NAV_end / NAV_base - 1``; the information ratio
against a benchmark is ``mean(r - r_b) / std(r - r_b) * sqrt(N)`` and the excess return the difference of
total returns. A number that is undefined (a flat series has no Sharpe) is None.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from trade_records.runfolder import BacktestSummary

Convention = Literal["standard", "qlib"]
DEFAULT_DAYS: dict[str, int] = {"standard": 252, "qlib": 238}


@dataclass(frozen=True)
class Conventions:
    """How the metrics are computed; printed beside them and stored in summary.json."""

    convention: Convention = "standard"
    trading_days: int | None = None
    """Trading days per year for annualised figures (default: 252, Qlib's 238 under ``qlib``)."""
    risk_free: float = 0.0
    """Annual risk-free rate for the Sharpe ratio (a fraction: 0.015 is 1.5%)."""

    @property
    def days(self) -> int:
        return self.trading_days or DEFAULT_DAYS[self.convention]

    @property
    def mode(self) -> str:
        """Qlib's name for how returns accumulate."""
        return "sum" if self.convention == "qlib" else "product"

    @property
    def rf_daily(self) -> float:
        """The risk-free rate per day: compounded (``standard``) or divided as Qlib does (``qlib``)."""
        if self.convention == "qlib":
            return self.risk_free / self.days
        return (1 + self.risk_free) ** (1 / self.days) - 1

    def to_json(self, start: str) -> dict[str, Any]:
        return {
            "convention": self.convention,
            "trading_days_per_year": self.days,
            "risk_free": self.risk_free,
            "mode": self.mode,
            "start": start,
        }


def _number(value: float) -> float | None:
    """A finite float for JSON, None for an undefined value."""
    value = float(value)
    return value if math.isfinite(value) else None


def returns(nav: Sequence[float]) -> np.ndarray:
    """Daily returns of a NAV series that starts at the base close."""
    values = np.asarray(nav, dtype=float)
    return values[1:] / values[:-1] - 1


def _ratio(excess: np.ndarray, n: int) -> float | None:
    """``mean / std * sqrt(n)`` of daily values (None for fewer than two days or no variation)."""
    if excess.size < 2:
        return None
    std = excess.std(ddof=1)
    return _number(excess.mean() / std * math.sqrt(n)) if std > 0 else None


def drawdown(nav: Sequence[float], dates: Sequence[str], mode: str = "product") -> tuple[float, str, str]:
    """(maximum drawdown, peak date, trough date): of the NAV (``product``, base included) or of the summed
    returns (``sum``, Qlib's: from the first day's close on)."""
    if mode == "sum":
        curve, days = np.cumsum(returns(nav)), list(dates[1:])
        falls = curve - np.maximum.accumulate(curve)
    else:
        curve, days = np.asarray(nav, dtype=float), list(dates)
        falls = curve / np.maximum.accumulate(curve) - 1
    if curve.size == 0:
        return 0.0, dates[0], dates[0]
    trough = int(np.argmin(falls))
    peak = int(np.argmax(curve[: trough + 1]))
    return float(falls[trough]), days[peak], days[trough]


def performance(
    nav: Sequence[float],
    dates: Sequence[str],
    conventions: Conventions,
    benchmarks: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Return and risk of one NAV series (``dates[0]`` is the base close), with excess return and information
    ratio against each benchmark NAV on the same dates (``vs_index``, ``vs_hold``: keys of ``benchmarks``)."""
    n = conventions.days
    r = returns(nav)
    total = nav[-1] / nav[0] - 1
    std = r.std(ddof=1) if r.size > 1 else math.nan
    if conventions.convention == "qlib":
        annualised = r.mean() * n if r.size else math.nan
    else:
        annualised = (1 + total) ** (n / r.size) - 1 if r.size else math.nan
    worst, peak, trough = drawdown(nav, dates, conventions.mode)
    row: dict[str, Any] = {
        "days": int(r.size),
        "final_nav": float(nav[-1]),
        "total_return": float(total),
        "annualised_return": _number(annualised),
        "volatility": _number(std * math.sqrt(n)),
        "sharpe": _ratio(r - conventions.rf_daily, n),
        "max_drawdown": worst,
        "drawdown_peak": peak,
        "drawdown_trough": trough,
        "calmar": _number(annualised / -worst) if worst < 0 else None,
        "mean": _number(r.mean()) if r.size else None,
        "std": _number(std),
    }
    for name, other in (benchmarks or {}).items():
        theirs = returns(other)
        row[f"excess_return_{name}"] = float(total - (other[-1] / other[0] - 1))
        row[f"information_ratio_{name}"] = _ratio(r - theirs, n)
        if name == "vs_hold":  # hold against itself has no day to win: "0.00%" read as "never beats hold"
            row["win_rate_vs_hold"] = float(np.mean(r > theirs)) if r.size and not np.array_equal(r, theirs) else None
    return row


def attribution(
    nav: Sequence[float], index: Sequence[float], pool: Sequence[float], conventions: Conventions
) -> dict[str, Any]:
    """How much of a return the market explains, on the same dates: ``beta`` and ``alpha`` of the OLS of the
    daily returns on the index's (alpha: the daily intercept x trading days per year, the excess return
    after beta), and ``r2_equal_weight``: the R^2 of the daily returns on those of the pool held equally
    weighted (the share of their variance that holding the pool explains)."""
    r, market, held = returns(nav), returns(index), returns(pool)

    def fit(x: np.ndarray) -> tuple[float, float, float] | None:
        if r.size < 3 or x.var() == 0:
            return None
        slope, intercept = np.polyfit(x, r, 1)
        residual = r - (intercept + slope * x)
        spread = ((r - r.mean()) ** 2).sum()
        return float(slope), float(intercept), float(1 - (residual**2).sum() / spread) if spread > 0 else math.nan

    on_market, on_pool = fit(market), fit(held)
    return {
        "beta": on_market[0] if on_market else None,
        "alpha": _number(on_market[1] * conventions.days) if on_market else None,
        "r2_equal_weight": _number(on_pool[2]) if on_pool else None,
    }


def activity(days: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a policy did over its DayRecords: trading, costs, failures and the model's usage per day."""
    count = len(days) or 1

    def total(key: str) -> float:
        return float(sum(day.get(key) or 0 for day in days))

    failed = [day for day in days if day["status"] == "failed"]
    return {
        "turnover": total("turnover") / count,
        "fees": total("fees"),
        "costs": total("costs"),
        "orders": int(total("orders")),
        "refused": int(total("refused")),
        "dividends": total("dividends"),
        "failed_days": len(failed),
        "failure_reasons": dict(Counter(day["reason"] for day in failed).most_common()),
        "unstopped_days": sum(day["episode_status"] != "stopped" for day in days),
        "tool_calls_per_day": total("tool_calls") / count,
        "tool_errors_per_day": total("tool_errors") / count,
        "prompt_tokens_per_day": total("prompt_tokens") / count,
        "completion_tokens_per_day": total("completion_tokens") / count,
        "trading": trading(days),
    }


def trading(days: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Whether a policy traded at all, so a return earned in cash reads as such: its days, the orders that
    filled (on days it played: a failed day's fills never stand), the days with a fill, and the days on which
    nothing it did worked (the day failed, or every tool call returned an error, none at all included).
    Forgiving of damaged records: the dashboard counts the lines of a run still being written."""

    def number(day: Mapping[str, Any], key: str) -> int:
        value = day.get(key)
        return value if isinstance(value, int) else 0

    played = [day for day in days if day.get("status") == "done"]
    filled = [number(day, "orders") - number(day, "refused") for day in played]
    return {
        "days": len(days),
        "orders_filled": sum(filled),
        "days_traded": sum(n > 0 for n in filled),
        "days_every_call_failed": sum(
            day.get("status") != "done" or number(day, "tool_errors") >= number(day, "tool_calls") for day in days
        ),
    }


TRADING_KEYS = ("days", "orders_filled", "days_traded", "days_every_call_failed")


def trading_note(counts: Any) -> str:
    """What :func:`trading`'s counts say beside a return when it is not a trader's: "every call failed on 6 of 6
    days", "never traded (0 orders filled on 6 days)", else nothing (nor for counts a summary does not hold)."""
    if not isinstance(counts, Mapping) or not all(isinstance(counts.get(key), int) for key in TRADING_KEYS):
        return ""
    days = counts["days"]
    if days and counts["days_every_call_failed"] == days:
        return f"every call failed on {days} of {days} days"
    if days and counts["orders_filled"] == 0:
        return f"never traded (0 orders filled on {days} days)"
    return ""


# -- the printed table ------------------------------------------------------------------------------


METRIC_ROWS: tuple[tuple[str, str, str], ...] = (
    ("total_return", "total return", "pct"),
    ("annualised_return", "annualised return ({n} d/yr)", "pct"),
    ("volatility", "volatility ({n} d/yr, ddof=1)", "upct"),
    ("sharpe", "Sharpe ({n} d/yr, rf {rf})", "num"),
    ("max_drawdown", "max drawdown", "pct"),
    ("drawdown_peak", "drawdown peak", "text"),
    ("drawdown_trough", "drawdown trough", "text"),
    ("calmar", "Calmar ({n} d/yr)", "num"),
    ("excess_return_vs_index", "excess return vs CSI300", "pct"),
    ("information_ratio_vs_index", "information ratio vs CSI300 ({n} d/yr)", "num"),
    ("excess_return_vs_hold", "excess return vs hold", "pct"),
    ("information_ratio_vs_hold", "information ratio vs hold ({n} d/yr)", "num"),
    ("win_rate_vs_hold", "daily win rate vs hold", "upct"),
    ("beta", "beta to CSI300", "num"),
    ("alpha", "alpha vs CSI300 (intercept x {n} d/yr)", "pct"),
    ("r2_equal_weight", "R^2 on equal-weight pool", "upct"),
    ("mean", "mean daily return", "pct"),
    ("std", "std of daily returns (ddof=1)", "upct"),
    ("turnover", "turnover per day", "upct"),
    ("fees", "fees (CNY)", "cny"),
    ("costs", "fees + slippage (CNY)", "cny"),
    ("dividends", "dividends (CNY)", "cny"),
    ("orders", "orders", "count"),
    ("refused", "refused orders", "count"),
    ("failed_days", "failed days", "count"),
    ("unstopped_days", "days not ended by stop", "count"),
    ("tool_calls_per_day", "tool calls per day", "num"),
    ("tool_errors_per_day", "tool errors per day", "num"),
    ("prompt_tokens_per_day", "prompt tokens per day", "count"),
    ("completion_tokens_per_day", "completion tokens per day", "count"),
    ("final_nav", "final NAV (CNY)", "cny"),
    ("days", "days", "count"),
)
"""The metrics of summary.json in the order the CLI and the report show them: (key, label, format); the
labels of annualised figures carry the trading days per year ({n}) and the Sharpe the
risk-free rate ({rf}). The report shows other numbers under their key."""


_TEXT = {
    "pct": lambda v: f"{v:+.2%}",
    "upct": lambda v: f"{v:.2%}",
    "num": lambda v: f"{v:,.2f}",
    "cny": lambda v: f"{v:,.0f}",
    "count": lambda v: f"{v:,.0f}",
}


def _text(value: Any, kind: str) -> str:
    if value is None or value == "":
        return "-"
    return str(value) if kind == "text" or isinstance(value, str) else _TEXT[kind](value)


def cell(row: Mapping[str, Any], key: str, kind: str) -> str:
    """A metric as printed, followed by its confidence interval (``<key>_ci``) when the row has one."""
    text = _text(row.get(key), kind)
    ci = row.get(f"{key}_ci")
    return f"{text} [{_text(ci[0], kind)}, {_text(ci[1], kind)}]" if ci else text


NOTE_AFTER, NOTE_LABEL = "total_return", "note"
"""Tables put a row's :func:`trading_note` on a line of this label under its total return."""


def trading_notes(rows: Mapping[str, Any]) -> list[str]:
    """Each row's :func:`trading_note`, or none at all when no row needs one (a table then has no note line)."""
    notes = [trading_note(row.get("trading")) if isinstance(row, Mapping) else "" for row in rows.values()]
    return notes if any(notes) else []


def table_lines(summary: BacktestSummary) -> list[str]:
    """The metrics of summary.json as a fixed-width table, one column per row of ``summary.rows``,
    with every annualised figure labelled by its trading days per year, each interval beside its value, a
    note under the total return of a row that never traded or whose every call failed, and the intervals'
    method (``conventions["ci"]``) below."""
    conv = summary.conventions
    fill = {"n": conv["trading_days_per_year"], "rf": f"{conv['risk_free']:.2%}"}
    rows = summary.rows
    present = {key for row in rows.values() for key in row}
    notes = trading_notes(rows)
    cells = []
    for key, label, kind in METRIC_ROWS:
        if key in present:
            cells.append([label.format(**fill), *(cell(row, key, kind) for row in rows.values())])
        if key == NOTE_AFTER and notes:
            cells.append([NOTE_LABEL, *(note or "-" for note in notes)])
    lines = _grid(["metric", *rows], cells)
    return [*lines, f"[lo, hi]: {conv['ci']}"] if conv.get("ci") else lines


def _grid(header: list[str], cells: list[list[str]]) -> list[str]:
    """Fixed-width lines: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    return [
        "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])
        for row in [header, *cells]
    ]


SPREAD_KIND = {"pct": "upct", "count": "num"}
"""How a metric's standard deviation is written (unsigned; counts with decimals)."""


def seed_spread(summaries: Mapping[int, BacktestSummary]) -> dict[str, Any]:
    """seeds.json: each numeric metric of each row over the summaries of runs that differ only by their seed:
    its mean, sample standard deviation (ddof=1), min and max, and each seed's value (a metric undefined
    under some seed, e.g. a flat run's Sharpe, is None throughout)."""
    first = next(iter(summaries.values()))
    rows: dict[str, dict[str, Any]] = {}
    for name in first.rows:
        rows[name] = {}
        for key, _, kind in METRIC_ROWS:
            values = [summary.rows[name].get(key) for summary in summaries.values()]
            if kind == "text" or all(v is None for v in values):
                continue
            defined = None not in values
            rows[name][key] = {
                "mean": float(np.mean(values)) if defined else None,
                "sd": float(np.std(values, ddof=1)) if defined and len(values) > 1 else None,
                "min": min(values) if defined else None,
                "max": max(values) if defined else None,
                "values": values,
            }
    return {"seeds": list(summaries), "conventions": first.conventions, "rows": rows}


def spread_lines(spread: Mapping[str, Any]) -> list[str]:
    """seeds.json as a fixed-width table: each metric ``mean ± sd`` over the seeds, one column per row."""
    conv = spread["conventions"]
    fill = {"n": conv["trading_days_per_year"], "rf": f"{conv['risk_free']:.2%}"}
    rows = spread["rows"]

    def shown(found: Mapping[str, Any] | None, kind: str) -> str:
        if not found or found["mean"] is None:
            return "-"
        return f"{_text(found['mean'], kind)} ± {_text(found['sd'], SPREAD_KIND.get(kind, kind))}"

    cells = [
        [label.format(**fill), *(shown(row.get(key), kind) for row in rows.values())]
        for key, label, kind in METRIC_ROWS
        if any(key in row for row in rows.values())
    ]
    seeds = spread["seeds"]
    return [*_grid(["metric", *rows], cells), f"mean ± sd (ddof=1) over {len(seeds)} seeds {seeds[0]}..{seeds[-1]}"]
