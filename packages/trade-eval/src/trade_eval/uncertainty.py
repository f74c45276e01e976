"""Bootstrap confidence intervals for the metrics, and paired differences between two runs.

A backtest's daily returns are autocorrelated (one portfolio carried from day to day, markets that trend), so
its days are resampled with the stationary bootstrap (Politis & Romano 1994): blocks of consecutive days with
geometric lengths of mean ``block`` days (default ``n ** (1/3)`` rounded, at least 1), wrapping around the end.
Single-day tasks are not independent either: the tasks of one T0 day share the market of its next three days,
and consecutive T0 days overlap in those reward windows. So :class:`Clusters` groups them by T0 day and draws
whole days, with all their tasks and samples, by the same stationary bootstrap over the ordered days.
Intervals are percentile intervals of the statistic over ``resamples`` resamples. Every series that is
compared (a policy and its benchmark, two runs) is resampled on the same indices, so the interval of a
difference is paired.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from trade_eval.metrics import Conventions, returns

Method = Literal["stationary", "iid"]


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn; :meth:`describe` is the text printed beside them and stored in summary.json."""

    method: Method = "stationary"
    resamples: int = 2000
    level: float = 0.95
    seed: int = 0
    block: float | None = None
    """Mean block length in days of the stationary bootstrap (default ``n ** (1/3)``)."""

    def block_for(self, n: int) -> float:
        return self.block or max(1.0, round(n ** (1 / 3)))

    def indices(self, n: int) -> np.ndarray:
        """``(resamples, n)`` indices into ``n`` observations, drawn from the seed alone."""
        rng = np.random.default_rng(self.seed)
        if self.method == "iid" or n < 2:
            return rng.integers(0, n, size=(self.resamples, n))
        starts = rng.integers(0, n, size=(self.resamples, n))
        new_block = rng.random((self.resamples, n)) < 1 / self.block_for(n)
        new_block[:, 0] = True
        # Each position continues the previous one's block (index + 1, wrapping) unless a block starts there.
        position = np.arange(n)
        last_start = np.maximum.accumulate(np.where(new_block, position, 0), axis=1)
        start_index = np.take_along_axis(starts, last_start, axis=1)
        return (start_index + position - last_start) % n

    def interval(self, stats: np.ndarray) -> list[float] | None:
        """The percentile interval of resampled statistics (None when too few are defined)."""
        stats = stats[np.isfinite(stats)]
        if stats.size < self.resamples / 2:
            return None
        tail = (1 - self.level) / 2 * 100
        lo, hi = np.percentile(stats, [tail, 100 - tail])
        return [float(lo), float(hi)]

    def describe(self, n: int | None = None, over: str = "days", each: str = "") -> str:
        """The method in words, for ``n`` observations: what is resampled (``over``) and what each drawn
        observation brings with it (``each``)."""
        if self.method == "iid":
            how, drawn = "bootstrap", "one by one"
        else:
            mean = f"{self.block_for(n):g}" if n else "n^(1/3)"
            how, drawn = "stationary bootstrap", f"blocks of consecutive days, mean block {mean} days"
        how = f"{how} over {over} ({'; '.join(filter(None, [drawn, each]))})"
        return f"{self.level:.0%} percentile intervals, {how}, {self.resamples} resamples, seed {self.seed}"


# -- statistics of resampled daily returns: rows are resamples -------------------------------------------


def _mean(r: np.ndarray, conventions: Conventions) -> np.ndarray:
    return r.mean(axis=1)


def _total(r: np.ndarray, conventions: Conventions) -> np.ndarray:
    return np.prod(1 + r, axis=1) - 1


def _sharpe(r: np.ndarray, conventions: Conventions) -> np.ndarray:
    if r.shape[1] < 2:
        return np.full(r.shape[0], math.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (r.mean(axis=1) - conventions.rf_daily) / r.std(axis=1, ddof=1)
    return np.where(r.std(axis=1, ddof=1) > 0, ratio * math.sqrt(conventions.days), math.nan)


STATISTICS = {"mean": _mean, "total_return": _total, "sharpe": _sharpe}
"""Metric keys of :func:`trade_eval.metrics.performance` with their statistic of resampled daily returns."""


def intervals(
    nav: list[float],
    conventions: Conventions,
    benchmarks: Mapping[str, list[float]],
    bootstrap: Bootstrap,
) -> dict[str, list[float] | None]:
    """``<metric>_ci`` for the mean daily return, total return and Sharpe of a NAV series, and the excess
    return against each benchmark (``excess_return_<name>_ci``), its days resampled with the benchmarks'."""
    r = returns(nav)
    picks = bootstrap.indices(r.size)
    resampled = r[picks]
    out = {f"{key}_ci": bootstrap.interval(stat(resampled, conventions)) for key, stat in STATISTICS.items()}
    for name, other in benchmarks.items():
        theirs = returns(other)[picks]
        out[f"excess_return_{name}_ci"] = bootstrap.interval(
            _total(resampled, conventions) - _total(theirs, conventions)
        )
    return out


def paired_difference(
    a: np.ndarray,
    b: np.ndarray,
    conventions: Conventions,
    bootstrap: Bootstrap,
    keys: tuple[str, ...] = tuple(STATISTICS),
) -> dict[str, dict[str, Any]]:
    """A minus B on aligned daily returns (by date): for each statistic the two values, their difference and its
    interval, both resampled on the same indices."""
    a, b = np.asarray(a, dtype=float)[None, :], np.asarray(b, dtype=float)[None, :]
    picks = bootstrap.indices(a.shape[1])
    out = {}
    for key in keys:
        stat = STATISTICS[key]
        value_a, value_b = float(stat(a, conventions)[0]), float(stat(b, conventions)[0])
        diff = stat(a[0][picks], conventions) - stat(b[0][picks], conventions)
        out[key] = {
            "a": value_a if math.isfinite(value_a) else None,
            "b": value_b if math.isfinite(value_b) else None,
            "difference": value_a - value_b if math.isfinite(value_a - value_b) else None,
            "ci": bootstrap.interval(diff),
        }
    return out


class Clusters:
    """Observations grouped by their T0 day, for intervals that resample days: the days in order (ISO dates
    sort chronologically), drawn with ``bootstrap``, each bringing every observation it holds. A resample's
    statistic is taken over all the observations of the days it drew."""

    def __init__(self, days: Sequence[Hashable], bootstrap: Bootstrap) -> None:
        self.days = sorted(set(days))
        where = {day: i for i, day in enumerate(self.days)}
        self.which = np.array([where[day] for day in days], dtype=int)
        self.bootstrap = bootstrap
        self.picks = bootstrap.indices(len(self.days)) if len(self.days) > 1 else None

    def describe(self) -> str:
        return self.bootstrap.describe(len(self.days), "T0 days", "each day with all its tasks and samples")

    def _sums(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        return np.bincount(self.which, weights=np.asarray(values, dtype=float), minlength=len(self.days))

    def ratio(
        self, numerator: Sequence[float] | np.ndarray, denominator: Sequence[float] | np.ndarray
    ) -> list[float] | None:
        """The interval of sum(numerator) / sum(denominator) (None under two days)."""
        if self.picks is None:
            return None
        top, bottom = self._sums(numerator)[self.picks], self._sums(denominator)[self.picks]
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.bootstrap.interval(top.sum(axis=1) / bottom.sum(axis=1))

    def mean(self, values: Sequence[float] | np.ndarray) -> list[float] | None:
        return self.ratio(values, np.ones(self.which.size))

    def difference(self, a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> dict[str, Any]:
        """The means of paired observations A and B, A minus B, and its interval (both drawn on the same days)."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        return {"a": float(a.mean()), "b": float(b.mean()), "difference": float((a - b).mean()), "ci": self.mean(a - b)}
