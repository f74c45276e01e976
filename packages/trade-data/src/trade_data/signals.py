"""Signals a synthetic market can plant: Alpha158's one-bar K-line factors, and how a planted one is recorded.

A planted signal gives the synthetic market a known edge, so that a learner has something to find and a
report can say how much of it was found (``trade data synth --signal KMID:0.2``). Each signal here is the
Alpha158 factor of the same name (trade-tools' ``compute_alpha_factor`` ranks it; its test checks the two
agree), computed from one day's raw open, high, low and close: a function of bars up to that day only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from trade_core.errors import TradeError

_EPS = 1e-12
"""Alpha158's guard against a zero high-low range."""

Bars = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""One day's (open, high, low, close), one value per stock."""
SIGNALS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "KMID": lambda o, h, lo, c: (c - o) / o,
    "KLEN": lambda o, h, lo, c: (h - lo) / o,
    "KMID2": lambda o, h, lo, c: (c - o) / (h - lo + _EPS),
    "KUP": lambda o, h, lo, c: (h - np.maximum(o, c)) / o,
    "KLOW": lambda o, h, lo, c: (np.minimum(o, c) - lo) / o,
    "KSFT": lambda o, h, lo, c: (2 * c - h - lo) / o,
    "KSFT2": lambda o, h, lo, c: (2 * c - h - lo) / (h - lo + _EPS),
}
"""Name -> the factor from (open, high, low, close), as Alpha158 defines it."""
MAX_IC = 0.9
RANK_CALIBRATION = 0.85
"""Shrinks the Pearson-exact move: the stocks' own noise is Student-t, against which a rank correlation reads
higher than the Pearson one (at 1.0 the realised rank IC was 1.17x the target, at 0.8 0.94x, over IC 0.1-0.5 on
30-300 stocks and 8 seeds); tests/test_signals.py measures the realised IC on generated markets."""


class PlantedSignal(BaseModel):
    """A signal planted in a synthetic market: the next day's stock-specific move gets a component
    proportional to the cross-sectional rank z-score of ``name`` at the day's close, sized for rank IC ``ic``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="an Alpha158 K-line factor (SIGNALS)")
    ic: float = Field(gt=0, le=MAX_IC, description="the targeted rank correlation with the next day's return")

    @classmethod
    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in SIGNALS:
            raise ValueError(f"unknown signal {name!r}: use one of {', '.join(SIGNALS)}")
        return name

    @classmethod
    def parse(cls, text: str) -> PlantedSignal:
        """``NAME:IC`` (``KMID:0.2``), with a one-line error for anything else."""
        name, _, ic = text.partition(":")
        name = name.strip().upper()
        if name not in SIGNALS:
            raise TradeError(f"--signal {text!r}: unknown signal {name!r}", hint=f"use one of {', '.join(SIGNALS)}")
        try:
            value = float(ic)
        except ValueError:
            raise TradeError(f"--signal {text!r} has no IC", hint="write NAME:IC, e.g. KMID:0.2") from None
        if not 0 < value <= MAX_IC:
            raise TradeError(f"--signal {text!r}: the IC must be in (0, {MAX_IC}]", hint="e.g. KMID:0.2")
        return cls(name=name, ic=value)

    def values(self, bars: Bars) -> np.ndarray:
        """The factor on each stock of one day (NaN where a bar is missing)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return SIGNALS[self.name](*bars)

    def strength(self) -> float:
        """Planted move per unit of z-score, in units of a stock's own daily noise (:data:`RANK_CALIBRATION`
        times the size whose Pearson correlation with the next day's move is the IC)."""
        return RANK_CALIBRATION * self.ic / np.sqrt(1.0 - self.ic**2)

    def describe(self) -> str:
        return f"planted signal {self.name}, IC {self.ic:g}"


def rank_z(values: np.ndarray) -> np.ndarray:
    """Cross-sectional ranks of the finite values mapped to a uniform of unit variance (0 elsewhere): a score
    whose size does not depend on the factor's tails, so limit days and jumps cannot dominate it."""
    z = np.zeros(values.shape)
    finite = np.isfinite(values)
    count = int(finite.sum())
    if count < 2:
        return z
    ranks = np.argsort(np.argsort(values[finite], kind="stable"), kind="stable")
    z[finite] = ((ranks + 0.5) / count - 0.5) * np.sqrt(12.0)
    return z


def planted_signal(parameters: dict[str, Any]) -> PlantedSignal | None:
    """The signal recorded in a dataset's ``trade.json`` parameters, if one was planted."""
    recorded = parameters.get("signal")
    return PlantedSignal.model_validate(recorded) if recorded else None


def describe_dataset(synthetic: bool, parameters: dict[str, Any]) -> str:
    """What a report says about the data: 'real market data', 'synthetic', or 'synthetic, planted signal ...'."""
    if not synthetic:
        return "real market data"
    signal = planted_signal(parameters)
    return "synthetic" if signal is None else f"synthetic, {signal.describe()}"
