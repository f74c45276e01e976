"""The report's charts as PNG bytes: cumulative return and drawdown of each portfolio, with matplotlib.

Figures are made without pyplot (no global state, no display needed: they render with Agg).
Every line is drawn from its first date's value (0%), so runs of different sizes and the index share one axis.
Labels are names of runs and policies; a CJK font is added to the fallback list when the machine has one
(Debian's fonts-noto-cjk), so a Chinese name is drawn rather than boxes.
"""

from __future__ import annotations

import io
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Literal

import matplotlib
import matplotlib.dates as mdates
import numpy as np
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

Kind = Literal["policy", "baseline", "index"]
CJK_FONTS = ("Noto Sans CJK SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei")
INDEX_COLOR = "#222222"


@dataclass(frozen=True)
class Line:
    """One portfolio's values on dates (NaN where it has none)."""

    label: str
    dates: list[str]
    values: list[float | None]
    kind: Kind = "policy"

    def array(self) -> np.ndarray:
        return np.array([np.nan if v is None else v for v in self.values], dtype=float)

    def growth(self) -> np.ndarray:
        """Value / first known value - 1."""
        values = self.array()
        known = values[~np.isnan(values)]
        return values / known[0] - 1 if len(known) and known[0] else np.full_like(values, np.nan)

    def drawdown(self) -> np.ndarray:
        """Value / running peak - 1 (0 at each new peak)."""
        values = self.array()
        return values / np.fmax.accumulate(values) - 1


def _fonts() -> list[str]:
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return ["DejaVu Sans", *(f for f in CJK_FONTS if f in installed)]


def _figure(title: str) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(10, 4.2), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, loc="left", fontsize=11)
    axes.grid(True, color="#e5e5e5", linewidth=0.8)
    axes.set_axisbelow(True)
    axes.spines[["top", "right"]].set_visible(False)
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    return figure, axes


def _date_axis(axes: Axes, lines: list[Line]) -> None:
    """Ticks on whole days: on a short run the automatic locator goes down to hours ("12:00"), which daily
    closes do not have."""
    days = np.array([d for line in lines for d in line.dates], dtype="datetime64[D]")
    span = int((days.max() - days.min()).astype(int)) if days.size else 0
    locator = mdates.DayLocator(interval=max(1, span // 8)) if span < 30 else mdates.AutoDateLocator(maxticks=10)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _style(line: Line, color: str) -> dict[str, object]:
    if line.kind == "index":
        return {"color": INDEX_COLOR, "linestyle": "--", "linewidth": 1.4}
    if line.kind == "baseline":
        return {"color": color, "linewidth": 1.2, "alpha": 0.85}
    return {"color": color, "linewidth": 2.4}


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def chart(lines: list[Line], kind: Literal["nav", "drawdown"]) -> Figure:
    """The figure of :func:`nav_chart` or :func:`drawdown_chart`, drawn (its tick labels set)."""
    if kind == "nav":
        title = "Cumulative return from the base close (after fees)"
        return _plot(lines, title, "growth", fill=False, legend="upper left")
    return _plot(lines, "Drawdown from the running peak", "drawdown", fill=True, legend="lower left")


def _fonts_and_size() -> AbstractContextManager[None]:
    return matplotlib.rc_context({"font.family": _fonts(), "font.size": 9})


def _plot(lines: list[Line], title: str, values_of: str, *, fill: bool, legend: str) -> Figure:
    with _fonts_and_size():
        figure, axes = _figure(title)
        _date_axis(axes, lines)
        colors = iter(matplotlib.color_sequences["tab10"])
        fill = fill and sum(line.kind == "policy" for line in lines) == 1
        for line in lines:
            color = INDEX_COLOR if line.kind == "index" else next(colors, "#888888")
            dates = np.array(line.dates, dtype="datetime64[D]")
            values = getattr(line, values_of)()
            axes.plot(dates, values, label=line.label, **_style(line, color))
            if fill and line.kind == "policy":
                axes.fill_between(dates, values, 0, color=color, alpha=0.12, linewidth=0)
        axes.axhline(0, color="#999999", linewidth=0.8)
        if lines:
            axes.legend(loc=legend, frameon=False, ncols=min(len(lines), 6), fontsize=8)
        FigureCanvasAgg(figure).draw()
        return figure


def nav_chart(lines: list[Line]) -> bytes:
    """Cumulative return of each line from its first date, as a PNG."""
    with _fonts_and_size():
        return _png(chart(lines, "nav"))


def drawdown_chart(lines: list[Line]) -> bytes:
    """Drawdown from the running peak of each line, as a PNG (the area under a lone policy's filled)."""
    with _fonts_and_size():
        return _png(chart(lines, "drawdown"))
