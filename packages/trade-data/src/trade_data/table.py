"""The long daily-bar table (``date,symbol,open,high,low,close,volume,factor``): reading and validation.

Validation runs before anything is written, so a bad file never leaves a half-written dataset.
A row with NaN or zero volume is a vendor's placeholder for a suspended day (flat prices at the
last close): it is kept as given and read as suspended, the way Qlib's collectors treat it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from trade_data.errors import DataValidationError
from trade_data.symbols import SYMBOL_PATTERN

COLUMNS = ("date", "symbol", "open", "high", "low", "close", "volume", "factor")
PRICES = ("open", "high", "low", "close")
NUMBERS = (*PRICES, "volume", "factor")
_SHOWN_ROWS = 3
_CHINA = dt.timezone(dt.timedelta(hours=8), "Asia/Shanghai")


def china_today() -> pd.Timestamp:
    """Today's date on the exchanges' clock: the latest date a daily bar can have, wherever this runs."""
    return pd.Timestamp(dt.datetime.now(_CHINA).date())


def stored_values(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The float32 values Qlib's cn layout stores for each row: prices x factor, volume / factor, factor.

    Validation, the writer and the comparison with a dataset's history all use this one encoding.
    """
    factor = frame["factor"].to_numpy("float64")
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        values = {name: (frame[name].to_numpy("float64") * factor).astype("<f4") for name in PRICES}
        values["volume"] = (frame["volume"].to_numpy("float64") / factor).astype("<f4")
        values["factor"] = factor.astype("<f4")
    return values


def read_table(path: Path) -> pd.DataFrame:
    """Read a parquet or CSV long table; the format is taken from the file name."""
    if not path.is_file():
        raise DataValidationError(f"{path}: no such file", hint="pass the path of a .parquet or .csv table")
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz")):
            return pd.read_csv(path)
    except Exception as exc:  # pandas/pyarrow raise many types for a corrupt file
        raise DataValidationError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from exc
    raise DataValidationError(f"{path}: unknown table format", hint="use .parquet or .csv")


def _day(day: pd.Timestamp) -> str:
    return "no date" if pd.isna(day) else f"{day:%Y-%m-%d}"


def _rows(frame: pd.DataFrame, mask: np.ndarray, what: str, source: str) -> DataValidationError:
    bad = frame[mask]
    shown = "; ".join(
        f"row {int(pos) + 1} ({row.symbol} {_day(row.date)} o={row.open} h={row.high} l={row.low} "
        f"c={row.close} v={row.volume} f={row.factor})"
        for pos, row in zip(np.flatnonzero(mask)[:_SHOWN_ROWS], bad.head(_SHOWN_ROWS).itertuples(), strict=False)
    )
    return DataValidationError(f"{source}: {len(bad)} rows with {what}; first: {shown}", hint="fix the source")


def validate_table(
    raw: pd.DataFrame,
    *,
    calendar: Sequence[pd.Timestamp] | None = None,
    today: pd.Timestamp | None = None,
    source: str = "table",
) -> pd.DataFrame:
    """Return the table normalised (types, upper-case symbols, sorted) or raise on the first problem.

    Each problem names how many rows have it and the first few (1-based row numbers of the
    input). ``calendar``, when given, must contain every date; no date may be after ``today``.
    Every value must fit the float32 files it is stored in, so nothing non-finite reaches a reader.
    """
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise DataValidationError(
            f"{source}: missing columns {', '.join(missing)}", hint=f"the table needs {','.join(COLUMNS)}"
        )
    frame = raw.loc[:, list(COLUMNS)].reset_index(drop=True)
    try:
        frame["date"] = pd.to_datetime(frame["date"]).dt.as_unit("ns").dt.normalize()
    except (ValueError, TypeError) as exc:
        raise DataValidationError(f"{source}: column date does not parse as dates ({exc})") from exc
    frame["symbol"] = frame["symbol"].astype(str).str.strip().str.upper()
    text = {}
    for column in NUMBERS:
        numbers = pd.to_numeric(frame[column], errors="coerce").astype("float64")
        text[column] = (frame[column].notna() & numbers.isna()).to_numpy()
        frame[column] = numbers
    texts = [column for column in NUMBERS if text[column].any()]
    prices_positive = (frame[list(PRICES)] > 0).all(axis=1).to_numpy()
    stored = stored_values(frame)
    storable = np.logical_and.reduce(
        [np.isfinite(stored[name]) & (stored[name] > 0) for name in (*PRICES, "factor")] + [~np.isinf(stored["volume"])]
    )

    checks: list[tuple[str, np.ndarray]] = [
        ("a malformed symbol (want e.g. SH600519)", ~frame["symbol"].str.match(SYMBOL_PATTERN).to_numpy()),
        (f"text where a number belongs ({', '.join(texts)})", np.logical_or.reduce(list(text.values()))),
        ("a missing date", frame["date"].isna().to_numpy()),
        ("a duplicate (symbol, date)", frame.duplicated(["symbol", "date"], keep=False).to_numpy()),
        ("NaN or non-positive prices", ~prices_positive),
        (
            "a price, volume or factor that is infinite or out of float32's range once adjusted by the factor",
            prices_positive & (frame["factor"] > 0).to_numpy() & ~storable,
        ),
        ("high < low", (frame["high"] < frame["low"]).to_numpy()),
        (
            "close or open outside [low, high]",
            (
                (frame["close"] > frame["high"])
                | (frame["close"] < frame["low"])
                | (frame["open"] > frame["high"])
                | (frame["open"] < frame["low"])
            ).to_numpy(),
        ),
        ("negative volume", (frame["volume"] < 0).to_numpy()),
        ("NaN or non-positive factor", ~(frame["factor"] > 0).to_numpy()),
    ]
    if today is not None:
        checks.append((f"a date after today ({today:%Y-%m-%d} in China)", (frame["date"] > today).to_numpy()))
    if calendar is not None:
        on_calendar = frame["date"].isin(pd.DatetimeIndex(calendar)).to_numpy()
        checks.append(("a date not on the calendar", ~on_calendar))
    failing = [(what, mask) for what, mask in checks if mask.any()]
    if failing:
        what, mask = failing[0]
        error = _rows(frame, mask, what, source)
        if len(failing) > 1:
            others = ", ".join(w for w, _ in failing[1:])
            error = DataValidationError(f"{error.message} (also: {others})", hint=error.hint)
        raise error
    return frame.sort_values(["symbol", "date"], kind="stable").reset_index(drop=True)
