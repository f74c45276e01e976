"""Property: importing over a dataset never changes or loses what it holds unless a flag allows exactly that.

Random small datasets get random second tables: new rows, identical copies of stored rows, revised
rows (a close moved inside [low, high]) and replacement universe files, imported with and without
``allow_revisions`` / ``allow_drop``. The expectation is computed here from the generated rows.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trade_data.errors import DataValidationError
from trade_data.importer import import_table
from trade_data.qlib_dir import FIELDS, read_calendar, read_feature, read_instruments_file, read_universe

SYMBOLS = ("SH600000", "SZ000001", "SZ300750")
DAYS = pd.bdate_range("2024-01-02", periods=6)
COLUMNS = ["date", "symbol", "open", "high", "low", "close", "volume", "factor"]
Key = tuple[str, pd.Timestamp]


@st.composite
def bars(draw: st.DrawFn, keys: list[Key]) -> dict[Key, tuple]:
    """One row per key: cent prices with room for a revision (high >= low + 0.02), volumes in lots or NaN."""
    rows = {}
    for symbol, day in keys:
        low = draw(st.integers(100, 3000))
        high = low + draw(st.integers(2, 300))
        volume = draw(st.one_of(st.just(np.nan), st.integers(0, 10_000).map(lambda lots: lots * 100.0)))
        factor = draw(st.sampled_from([1.0, 1.5, 2.345678]))
        prices = [draw(st.integers(low, high)) / 100 for _ in range(2)]
        rows[symbol, day] = (prices[0], high / 100, low / 100, prices[1], volume, factor)
    return rows


keys = st.lists(st.tuples(st.sampled_from(SYMBOLS), st.sampled_from(list(DAYS))), min_size=1, max_size=12, unique=True)
intervals = st.lists(
    st.tuples(st.sampled_from(SYMBOLS), st.integers(0, len(DAYS) - 1), st.integers(0, len(DAYS) - 1)).map(
        lambda t: (t[0], DAYS[min(t[1], t[2])], DAYS[max(t[1], t[2])])
    ),
    min_size=1,
    max_size=4,
)


def _csv(path: Path, rows: dict[Key, tuple]) -> Path:
    frame = pd.DataFrame([(day, symbol, *values) for (symbol, day), values in rows.items()], columns=COLUMNS)
    frame.to_csv(path, index=False)
    return path


def _members_file(path: Path, members: list[tuple]) -> Path:
    path.write_text("".join(f"{s}\t{a:%Y-%m-%d}\t{b:%Y-%m-%d}\n" for s, a, b in members))
    return path


def _member_days(members: list[tuple], calendar: list[pd.Timestamp]) -> set[Key]:
    return {(s, day) for s, a, b in members for day in calendar if a <= day <= b}


def _stored(out: Path) -> dict[Key, tuple[bytes, ...]]:
    """Every stored row's bytes, field by field, keyed by (symbol, date)."""
    calendar = read_calendar(out)
    rows: dict[Key, tuple[bytes, ...]] = {}
    for symbol in read_instruments_file(out / "instruments" / "all.txt")["symbol"]:
        start, factor = read_feature(out, symbol, "factor")
        columns = {name: read_feature(out, symbol, name)[1] for name in FIELDS}
        for i in np.flatnonzero(~np.isnan(factor)):
            rows[symbol, calendar[start + i]] = tuple(columns[name][i].tobytes() for name in FIELDS)
    return rows


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.mark.slow  # two small imports per example
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), old_keys=keys, new_keys=keys, old_members=intervals, new_members=st.none() | intervals)
def test_imports_change_history_only_with_the_matching_flag(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    old_keys: list[Key],
    new_keys: list[Key],
    old_members: list[tuple],
    new_members: list[tuple] | None,
) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    old = data.draw(bars(old_keys))
    new = data.draw(bars(new_keys))
    revised = set()
    for key in set(old) & set(new):  # a stored row comes again: as it is, or with its close moved
        o, h, low, c, v, f = old[key]
        if data.draw(st.booleans()):
            revised.add(key)
            new[key] = (o, h, low, low if c != low else h, v, f)
        else:
            new[key] = old[key]
    allow_revisions, allow_drop = data.draw(st.booleans()), data.draw(st.booleans())
    out = import_table(
        _csv(tmp / "old.csv", old), tmp / "ds", universe_files={"csi300": _members_file(tmp / "m1.txt", old_members)}
    )
    before, digest = _stored(out), _digest(out)
    old_calendar = list(read_calendar(out))
    lost = _member_days(old_members, old_calendar) - _member_days(new_members or old_members, old_calendar)
    universes = {} if new_members is None else {"csi300": _members_file(tmp / "m2.txt", new_members)}

    refused = (revised and not allow_revisions) or (lost and not allow_drop)
    if refused:
        with pytest.raises(
            DataValidationError, match="--allow-revisions" if revised and not allow_revisions else "--allow-drop"
        ):
            import_table(
                _csv(tmp / "new.csv", new),
                out,
                universe_files=universes,
                allow_revisions=allow_revisions,
                allow_drop=allow_drop,
            )
        assert _digest(out) == digest
        return
    import_table(
        _csv(tmp / "new.csv", new),
        out,
        universe_files=universes,
        allow_revisions=allow_revisions,
        allow_drop=allow_drop,
    )
    after = _stored(out)
    assert set(after) == set(old) | set(new)  # nothing dropped, every new row added
    assert set(read_calendar(out)) >= set(old_calendar)
    for key, fields in before.items():
        if key in revised:
            assert fields[3] != after[key][3]  # the close
        else:
            assert fields[:6] == after[key][:6], key  # open, high, low, close, volume, factor: byte for byte
    for symbol in {s for s, _ in after}:  # change: versus the previous stored close, from the stored closes
        rows = [after[key] for key in sorted(k for k in after if k[0] == symbol)]
        close = np.array([np.frombuffer(r[3], "<f4")[0] for r in rows], dtype="float64")
        expected_change = np.concatenate([[np.nan], close[1:] / close[:-1] - 1]).astype("<f4")
        assert [r[6] for r in rows] == [v.tobytes() for v in expected_change], symbol
    members = read_universe(out, "csi300")
    expected = new_members or old_members
    assert sorted(members.itertuples(index=False, name=None)) == sorted(expected)
