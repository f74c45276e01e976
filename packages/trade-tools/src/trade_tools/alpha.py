"""Qlib's expression operators in numpy, over [day, symbol] columns that end at T0.

``compute_alpha_factor`` runs thousands of times per rollout, and Qlib ``eval``s its input and
reads past ``end_time`` (shared/docs/qlib-0.9.7.md), so a checked
:data:`~trade_tools.expression.Node` is evaluated here instead, over arrays that hold nothing
after T0. The semantics are qlib 0.9.7's (``qlib/data/ops.py``: pandas rolling with
``min_periods=1``, where pandas drops ±inf; Cython Slope/Rsquare/Resi; EMA as ``ewm(span=N)``),
checked against ``D.features`` in tests/test_alpha.py. Fields are read as float32 like Qlib's
bins and element-wise arithmetic on them stays float32, as numpy keeps it inside Qlib, so
cancellations round alike; window statistics run in float64, as in pandas. Like Qlib, each
symbol's series starts at its first stored day, here its first row with any non-NaN field:
earlier rows are absent, later NaN rows are suspensions. Evaluation is demand driven: the value
at T0 touches only the trailing ``lookback(node) + 1`` rows, vectorised across symbols.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import as_strided

from trade_data.store import PointInTimeView
from trade_tools.expression import (
    FIELDS,
    Const,
    ExpressionError,
    Field,
    Node,
    Op,
    check_work,
    lookback,
    parse_expression,
    reach,
)
from trade_tools.text import say, shown

FLAT_STD = 2e-5
"""Qlib sets Rsquare and Corr to NaN where a rolling std is within this of 0 (``np.isclose`` atol)."""


def evaluate(node: Node, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """``node`` on every row of ``columns`` (field -> [day, symbol] float64, oldest first, NaN = no bar)."""
    return _Evaluator(node, columns, rows=None).result(node)


def value_at_t0(node: Node, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """``node`` on the last row (T0) of ``columns``, one value per symbol, reading only the rows it needs.

    This is what a tool call computes, so a call whose work over all its symbols exceeds
    :data:`~trade_tools.expression.MAX_WORK` is refused (:class:`ExpressionError`) before evaluating.
    """
    evaluator = _Evaluator(node, columns, rows=1)
    check_work(node, evaluator.width)
    return evaluator.result(node)[-1]


def columns_at(view: PointInTimeView, symbols: Sequence[str], rows: int | None = None) -> dict[str, np.ndarray]:
    """Float64 [day, symbol] columns ending at T0, holding the values of Qlib's bins.

    Adjusted OHLC, and volume in shares / factor rounded to float32 like the bins, NaN wherever
    nothing is stored; zero-volume placeholder rows keep their prices, as Qlib sees them. They
    start at the dataset's first day, or ``rows`` days back (``lookback(node) + 1`` is enough for
    the value at T0, and much cheaper). A symbol whose slice opens on a NaN gap is then taken to
    start after it, which only matters for IdxMax/IdxMin/WMA and comparisons over that gap.
    """
    return view.qlib_fields(list(symbols), rows)


@functools.cache
def alpha158_expressions() -> dict[str, str]:
    """All of Alpha158 as Qlib's config writes it (VWAP0 too), name -> expression, in Qlib's order.

    Read from the table trade-tools ships, ``alpha158.json``: pyqlib's own definitions, written by
    scripts/alpha158_table.py, so that neither Qlib nor its dependencies are needed here.
    """
    table = resources.files("trade_tools").joinpath("alpha158.json").read_text(encoding="utf-8")
    return json.loads(table)["factors"]


@functools.cache
def alpha158() -> dict[str, Node]:
    """Alpha158's factors parsed, without VWAP0 (there is no vwap data)."""
    return {name: parse_expression(text) for name, text in alpha158_expressions().items() if "$vwap" not in text}


def __getattr__(name: str) -> object:
    """``ALPHA158`` is built on first use, so importing this module reads and parses nothing."""
    if name == "ALPHA158":
        return alpha158()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve(text: str) -> tuple[str, Node]:
    """(name, node) for an Alpha158 factor name in any case; ("", node) for a custom expression."""
    word = text.strip() if isinstance(text, str) else ""
    if not re.fullmatch(r"[A-Za-z]+[0-9]*", word):
        return "", parse_expression(text)
    name = word.upper()
    node = alpha158().get(name)
    if node is None:
        hint = (
            say("它需要 $vwap，本数据没有该字段", "it needs $vwap, which this data lacks")
            if name == "VWAP0"
            else say(
                "例如 KMID、ROC20、RSQR60，或用 $字段 写的表达式",
                "e.g. KMID, ROC20, RSQR60, or an expression of $fields",
            )
        )
        raise ExpressionError(
            say(f"未知的Alpha158因子 '{shown(word)}'", f"unknown Alpha158 factor '{shown(word)}'"), hint=hint
        )
    return name, node


def ranked_at_t0(
    view: PointInTimeView,
    node: Node,
    symbols: Sequence[str],
    shown: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
) -> list[tuple[str, float]]:
    """``(symbol, value)`` of ``node`` at T0, highest first, NaN (no data) last: what ``compute_alpha_factor``
    shows, and what a baseline or a metric reading the same factor ranks by. ``shown``: the columns as an
    anonymized episode shows them (``Episode.shown_columns``), under which a level reads as shown."""
    columns = columns_at(view, symbols, rows=lookback(node) + 1)
    if shown is not None:
        columns = shown(columns)
    values = value_at_t0(node, columns)
    order = sorted(range(len(symbols)), key=lambda i: (np.isnan(values[i]), 0.0 if np.isnan(values[i]) else -values[i]))
    return [(symbols[i], float(values[i])) for i in order]


class _Evaluator:
    """One evaluation: the columns, and where each symbol's series starts."""

    def __init__(self, node: Node, columns: Mapping[str, np.ndarray], rows: int | None) -> None:
        self.columns = _checked(node, columns)
        self.days, self.width = next(iter(self.columns.values())).shape
        self.rows = self.days if rows is None else min(rows, self.days)
        deepest = max(0, self.days - self.rows - lookback(node))
        self.first = _series_start(self.columns.values(), deepest, self.days)

    def result(self, node: Node) -> np.ndarray:
        with np.errstate(all="ignore"):
            values = self.tail(node, self.rows)
        here = np.arange(self.days - self.rows, self.days)[:, None]
        return np.where(here >= self.first, values, np.nan).astype(np.float64)

    def tail(self, node: Node, k: int) -> np.ndarray | float:
        """The last ``k`` rows of ``node`` (fewer when the columns are shorter)."""
        k = min(k, self.days)
        if isinstance(node, Const):
            return node.value
        if isinstance(node, Field):
            return self.columns[node.name][self.days - k :].astype(np.float32)
        if not node.params:
            return _ELEMENTWISE[node.name](*(self.tail(arg, k) for arg in node.args))
        inputs = [self.absent_to_nan(self.tail(arg, k + reach(node))) for arg in node.args]  # type: ignore[arg-type]
        return self.windowed(node, inputs, k)

    def absent_to_nan(self, values: np.ndarray) -> np.ndarray:
        """NaN on rows before a symbol's series starts (Qlib has no such rows at all)."""
        start = self.days - len(values)
        if self.first.max() <= start:
            return values
        return np.where(np.arange(start, self.days)[:, None] >= self.first, values, np.nan)

    def windowed(self, op: Op, inputs: list[np.ndarray], k: int) -> np.ndarray:
        n, x = op.window, inputs[0]
        if op.name in ("Ref", "Delta"):
            shifted = _shift(x, n, k)
            return shifted if op.name == "Ref" else x[len(x) - k :] - shifted
        if op.name == "EMA":
            return pd.DataFrame(_finite(x)).ewm(span=n, min_periods=1).mean().to_numpy()[-k:]
        if op.name in ("Corr", "Cov"):
            left, right = (_windows(_finite(v), n, k) for v in inputs)
            return _corr(left, right) if op.name == "Corr" else _cov(left, right)
        if op.name in _RAW:
            return _RAW[op.name](_windows(x, n, k))
        windows = _windows(_finite(x), n, k)
        if op.name in _CLIPPED:
            starts = np.arange(self.days - k, self.days)[:, None] - n + 1
            return _CLIPPED[op.name](windows, np.clip(self.first - starts, 0, n))
        if op.name == "Quantile":
            return _quantile(windows, op.params[1])
        return _ROLLING[op.name](windows)


def _checked(node: Node, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    checked = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items() if name in FIELDS}
    missing = sorted(_fields(node) - checked.keys())
    shapes = {values.shape for values in checked.values()}
    if missing or len(shapes) != 1 or len(next(iter(shapes))) != 2 or 0 in next(iter(shapes)):
        raise ValueError(f"need same-shaped non-empty [day, symbol] columns with {missing or 'the fields'}: {shapes}")
    return checked


def _fields(node: Node) -> set[str]:
    if isinstance(node, Field):
        return {node.name}
    return set().union(*map(_fields, node.args)) if isinstance(node, Op) else set()


def _series_start(columns: Iterable[np.ndarray], lo: int, days: int) -> np.ndarray:
    """Per symbol, its first row with any non-NaN field; 0 when that lies before row ``lo`` (never read)."""
    arrays = list(columns)
    present = np.logical_or.reduce([~np.isnan(a[lo:]) for a in arrays])
    first = np.where(present.any(axis=0), present.argmax(axis=0) + lo, days)
    late = np.flatnonzero(first > lo) if lo > 0 else np.empty(0, dtype=int)
    if late.size:
        earlier = np.logical_or.reduce([~np.isnan(a[:lo, late]).all(axis=0) for a in arrays])
        first[late[earlier]] = 0
    return first


def _finite(values: np.ndarray) -> np.ndarray:
    """±inf as NaN: what pandas' rolling and ewm do before aggregating."""
    return np.where(np.isinf(values), np.nan, values)


def _shift(x: np.ndarray, n: int, k: int) -> np.ndarray:
    """Rows ``n`` back for the last ``k`` rows (``Series.shift(n)``)."""
    padded = np.concatenate([np.full((n, x.shape[1]), np.nan, dtype=x.dtype), x])
    return padded[len(x) - k : len(x)]


def _windows(x: np.ndarray, n: int, k: int) -> np.ndarray:
    """[k, symbol, n] contiguous windows ending at each of the last ``k`` rows, NaN-padded before row 0.

    Each window is its own contiguous copy, so its sums come out the same however many rows are
    evaluated: the value at T0 from a trailing slice equals the full-history one bit for bit.
    """
    need = k + n - 1
    if len(x) < need:
        x = np.concatenate([np.full((need - len(x), x.shape[1]), np.nan), x])
    x = np.ascontiguousarray(x[len(x) - need :], dtype=np.float64)
    row, col = x.strides
    return np.ascontiguousarray(as_strided(x, shape=(k, x.shape[1], n), strides=(row, col, row), writeable=False))


def _count(w: np.ndarray) -> np.ndarray:
    return (~np.isnan(w)).sum(axis=-1)


def _sum(w: np.ndarray) -> np.ndarray:
    return np.where(_count(w) > 0, np.where(np.isnan(w), 0.0, w).sum(axis=-1), np.nan)


def _mean(w: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(w), 0.0, w).sum(axis=-1) / _count(w)


def _deviations(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(count, deviations from the window mean with 0 for NaN) per window."""
    valid = ~np.isnan(w)
    return valid.sum(axis=-1), np.where(valid, w - _mean(w)[..., None], 0.0)


def _var(w: np.ndarray) -> np.ndarray:
    count, dev = _deviations(w)
    return np.where(count >= 2, (dev * dev).sum(axis=-1) / (count - 1), np.nan)


def _std(w: np.ndarray) -> np.ndarray:
    return np.sqrt(_var(w))


def _skew(w: np.ndarray) -> np.ndarray:
    count, dev = _deviations(w)
    m2, m3 = (dev**2).sum(axis=-1) / count, (dev**3).sum(axis=-1) / count
    value = np.sqrt(count * (count - 1.0)) / (count - 2.0) * m3 / m2**1.5
    return np.where((count >= 3) & ~_flat(w), value, np.nan)


def _kurt(w: np.ndarray) -> np.ndarray:
    count, dev = _deviations(w)
    m2, m4 = (dev**2).sum(axis=-1) / count, (dev**4).sum(axis=-1) / count
    value = ((count * count - 1.0) * m4 / (m2 * m2) - 3.0 * (count - 1.0) ** 2) / ((count - 2.0) * (count - 3.0))
    return np.where((count >= 4) & ~_flat(w), value, np.nan)


def _flat(w: np.ndarray) -> np.ndarray:
    """All values of the window equal: pandas gives NaN skew and kurtosis there, however tiny the spread."""
    return _max(w) == _min(w)


def _max(w: np.ndarray) -> np.ndarray:
    return np.where(_count(w) > 0, np.where(np.isnan(w), -np.inf, w).max(axis=-1), np.nan)


def _min(w: np.ndarray) -> np.ndarray:
    return np.where(_count(w) > 0, np.where(np.isnan(w), np.inf, w).min(axis=-1), np.nan)


def _order_stats(w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``lo``-th and ``hi``-th smallest non-NaN values of each window (NaN sorts last)."""
    ordered = np.sort(w, axis=-1)
    last = w.shape[-1] - 1
    pick = [np.take_along_axis(ordered, np.clip(i, 0, last)[..., None], axis=-1)[..., 0] for i in (lo, hi)]
    return pick[0], pick[1]


def _quantile(w: np.ndarray, q: float) -> np.ndarray:
    """pandas' rolling quantile with linear interpolation."""
    count = _count(w)
    position = q * (count - 1)
    lo = np.floor(position).astype(int)
    low, high = _order_stats(w, lo, lo + 1)
    fraction = position - lo
    value = np.where(fraction == 0, low, low + (high - low) * fraction)
    return np.where(count > 0, value, np.nan)


def _median(w: np.ndarray) -> np.ndarray:
    count = _count(w)
    low, high = _order_stats(w, (count - 1) // 2, count // 2)
    return np.where(count > 0, np.where(count % 2 == 1, low, (low + high) / 2), np.nan)


def _rank(w: np.ndarray) -> np.ndarray:
    """Percentile of the window's last value among its values, ties averaged (pandas ``rank(pct=True)``)."""
    last = w[..., -1:]
    less, equal = (w < last).sum(axis=-1), (w == last).sum(axis=-1)
    return np.where(np.isnan(last[..., 0]), np.nan, (less + (equal + 1) / 2) / _count(w))


def _mad(w: np.ndarray) -> np.ndarray:
    count, dev = _deviations(w)
    return np.abs(dev).sum(axis=-1) / count


def _index_of(w: np.ndarray, absent: np.ndarray, largest: bool) -> np.ndarray:
    """Qlib's ``x.argmax() + 1`` over the window from the series start: a NaN in it wins, as in numpy."""
    position = np.arange(w.shape[-1])
    inside = position >= absent[..., None]
    missing = np.isnan(w) & inside
    fill = -np.inf if largest else np.inf
    values = np.where(inside & ~np.isnan(w), w, fill)
    best = values.argmax(axis=-1) if largest else values.argmin(axis=-1)
    found = np.where(missing.any(axis=-1), missing.argmax(axis=-1), best) - absent + 1
    return np.where(_count(w) > 0, found, np.nan)


def _wma(w: np.ndarray, absent: np.ndarray) -> np.ndarray:
    """Qlib's ``nanmean(w * x)`` with linear weights over the window from the series start, summing to 1."""
    length = w.shape[-1] - absent[..., None]
    weights = np.maximum(np.arange(w.shape[-1]) - absent[..., None] + 1, 0) / (length * (length + 1) / 2)
    return np.where(np.isnan(w), 0.0, weights * w).sum(axis=-1) / _count(w)


def _regression(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of each window on its row positions, as Qlib's Cython rolling_* (inf kept).

    Returns (last row's centred position, y mean, Sxy, Sxx, Syy).
    """
    valid = ~np.isnan(w)
    count = valid.sum(axis=-1)
    position = np.broadcast_to(np.arange(w.shape[-1], dtype=np.float64), w.shape)
    x_mean = np.where(valid, position, 0.0).sum(axis=-1) / count
    y_mean = np.where(valid, w, 0.0).sum(axis=-1) / count
    dx = np.where(valid, position - x_mean[..., None], 0.0)
    dy = np.where(valid, w - y_mean[..., None], 0.0)
    sums = ((dx * dy).sum(axis=-1), (dx * dx).sum(axis=-1), (dy * dy).sum(axis=-1))
    return (w.shape[-1] - 1) - x_mean, y_mean, *sums


def _slope(w: np.ndarray) -> np.ndarray:
    _, _, sxy, sxx, _ = _regression(w)
    return sxy / sxx


def _resi(w: np.ndarray) -> np.ndarray:
    x_last, y_mean, sxy, sxx, _ = _regression(w)
    return w[..., -1] - (y_mean + sxy / sxx * x_last)


def _rsquare(w: np.ndarray) -> np.ndarray:
    _, _, sxy, sxx, syy = _regression(w)
    return np.where(_std(_finite(w)) <= FLAT_STD, np.nan, sxy * sxy / (sxx * syy))


def _paired(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, left deviations, right deviations) over the rows where both are finite (pandas' prep_binary)."""
    both = ~np.isnan(left) & ~np.isnan(right)
    left, right = np.where(both, left, np.nan), np.where(both, right, np.nan)
    return both.sum(axis=-1), _deviations(left)[1], _deviations(right)[1]


def _cov(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    count, dl, dr = _paired(left, right)
    return np.where(count >= 2, (dl * dr).sum(axis=-1) / (count - 1), np.nan)


def _corr(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    count, dl, dr = _paired(left, right)
    value = (dl * dr).sum(axis=-1) / np.sqrt((dl * dl).sum(axis=-1) * (dr * dr).sum(axis=-1))
    flat = (_std(left) <= FLAT_STD) | (_std(right) <= FLAT_STD)
    return np.where((count >= 2) & ~flat, value, np.nan)


def _flag(compare: Callable[[object, object], np.ndarray]) -> Callable[[object, object], np.ndarray]:
    """A comparison as float32 0/1 (NaN compares false), which mixes with numbers as Qlib's bools do."""
    return lambda a, b: compare(a, b).astype(np.float32)


_ELEMENTWISE: dict[str, Callable[..., np.ndarray]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Power": np.power,
    "Greater": np.maximum,
    "Less": np.minimum,
    "Gt": _flag(np.greater),
    "Ge": _flag(np.greater_equal),
    "Lt": _flag(np.less),
    "Le": _flag(np.less_equal),
    "Eq": _flag(np.equal),
    "Ne": _flag(np.not_equal),
    "And": np.minimum,
    "Or": np.maximum,
    "Not": lambda a: 1.0 - a,
    "Abs": np.abs,
    "Sign": np.sign,
    "Log": np.log,
    "If": lambda condition, a, b: np.where(condition != 0, a, b),
}
_ROLLING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Mean": _mean,
    "Sum": _sum,
    "Std": _std,
    "Var": _var,
    "Skew": _skew,
    "Kurt": _kurt,
    "Max": _max,
    "Min": _min,
    "Med": _median,
    "Mad": _mad,
    "Rank": _rank,
}
_RAW: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Count": lambda w: _count(w).astype(np.float64),  # pandas counts inf
    "Slope": _slope,
    "Rsquare": _rsquare,
    "Resi": _resi,
}
_CLIPPED: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "IdxMax": lambda w, absent: _index_of(w, absent, largest=True),
    "IdxMin": lambda w, absent: _index_of(w, absent, largest=False),
    "WMA": _wma,
}
