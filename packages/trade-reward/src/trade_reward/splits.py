"""Time splits for ``trade data tasks``: ``--split`` and ``--pool-size`` parsed, and each split's embargoed days.

A T0 belongs to a split only if its T+HORIZON also lies inside it, so no forward window crosses into the next
split.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from dataclasses import dataclass

import numpy as np

from trade_core.errors import TradeError
from trade_core.params import iso_date
from trade_data.store import MarketStore
from trade_reward.forward import HORIZON

_SPLIT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Split:
    """A named, inclusive date range."""

    name: str
    start: dt.date
    end: dt.date


def parse_splits(text: str) -> list[Split]:
    """'train=2018-01-01:2023-12-31,val=...' -> splits sorted by start; overlaps are refused."""
    splits = [_parse_split(part.strip()) for part in text.split(",") if part.strip()]
    if not splits:
        raise TradeError("--split is empty", hint="e.g. train=2018-01-01:2023-12-31,val=2024-01-01:2024-12-31")
    names = [s.name for s in splits]
    if len(set(names)) != len(names):
        raise TradeError(f"--split names a split twice: {', '.join(names)}")
    splits.sort(key=lambda s: s.start)
    for before, after in itertools.pairwise(splits):
        if after.start <= before.end:
            raise TradeError(f"--split: {before.name} ({before.start}..{before.end}) overlaps {after.name}")
    return splits


def _parse_split(part: str) -> Split:
    name, _, dates = part.partition("=")
    start, _, end = dates.partition(":")
    hint = "use NAME=YYYY-MM-DD:YYYY-MM-DD, comma separated"
    if not _SPLIT_NAME.match(name.strip()):
        raise TradeError(f"--split: {part!r} has no valid name (letters, digits, - and _)", hint=hint)
    try:
        first, last = iso_date(start.strip()), iso_date(end.strip())
    except ValueError:
        raise TradeError(f"--split: {part!r} is not NAME=START:END with dates", hint=hint) from None
    if last < first:
        raise TradeError(f"--split: {part!r} ends before it starts", hint=hint)
    return Split(name.strip(), first, last)


def parse_pool_size(text: str) -> tuple[int, int]:
    """'20' -> (20, 20); '10-30' -> (10, 30)."""
    low, sep, high = text.strip().partition("-")
    if not low.isdigit() or (sep and not high.isdigit()):
        raise TradeError(f"--pool-size {text!r} is not N or MIN-MAX", hint="e.g. 20 or 10-30")
    bounds = (int(low), int(high) if sep else int(low))
    if bounds[0] < 1 or bounds[1] < bounds[0]:
        raise TradeError(f"--pool-size {text!r}: want 1 <= MIN <= MAX")
    return bounds


def split_days(store: MarketStore, split: Split) -> list[dt.date]:
    """Trading days T0 of the split whose T+HORIZON is in the dataset and on or before the split's end."""
    calendar = store.calendar
    first = int(calendar.searchsorted(np.datetime64(split.start)))
    after_end = int(calendar.searchsorted(np.datetime64(split.end), side="right"))
    return [calendar[t].date() for t in range(first, after_end - HORIZON)]


def days_per_split(store: MarketStore, splits: list[Split]) -> dict[Split, list[dt.date]]:
    """Each split's days; a split without one is an error naming the dataset's range."""
    found = {split: split_days(store, split) for split in splits}
    for split, days in found.items():
        if not days:
            first, last = store.calendar[0].date(), store.calendar[-1].date()
            raise TradeError(
                f"split {split.name} ({split.start}..{split.end}) has no trading day with its T+{HORIZON} inside it",
                hint=f"the dataset covers {first} .. {last}",
            )
    return found
