"""Downloadable market data: a network step (``fetch``) kept apart from an offline step (``convert``).

Training machines are usually offline, so every source can convert a file fetched elsewhere
(``trade data download --from-file``). Sources arrive through the ``trade_register_data_sources``
hook, built-ins included. pandas and the dataset writer are imported inside the steps so that
listing sources (``trade plugins``) stays fast.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import http.client
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from tqdm import tqdm

from trade_core.errors import TradeError
from trade_core.plugins import TradePluginManager
from trade_core.registry import Registry
from trade_data import hookspecs

if TYPE_CHECKING:
    import pandas as pd

    from trade_data.qlib_dir import DatasetMeta


class DataSource(ABC):
    """A named origin of real daily bars: ``fetch`` needs the network, ``convert`` never does."""

    name: str
    description: str
    origin: str
    """The URL or service ``fetch`` reads, shown in ``--help`` so users can fetch it by hand."""
    options: Mapping[str, str]
    """Option name -> help for the ``fetch`` options this source accepts (e.g. ``start``)."""

    @abstractmethod
    def fetch(self, workdir: Path, options: Mapping[str, str]) -> Path:
        """Download the artifact into ``workdir`` and return its path."""

    @abstractmethod
    def convert(self, artifact: Path, out: Path) -> Path:
        """Turn an artifact into a dataset at ``out``; a failure leaves an existing ``out`` untouched."""


DATA_SOURCES = Registry(hookspecs.trade_register_data_sources, "data source", DataSource)


def download(
    name: str,
    out: Path,
    *,
    from_file: Path | None = None,
    options: Mapping[str, str | None] | None = None,
    keep_download: Path | None = None,
    manager: TradePluginManager | None = None,
) -> Path:
    """Fetch (unless ``from_file`` is given) and convert source ``name`` into a dataset at ``out``."""
    source, out = DATA_SOURCES.get(name, manager), Path(out)
    given = {key: value for key, value in (options or {}).items() if value is not None}
    unknown = sorted(set(given) - set(source.options))
    if unknown:
        takes = ", ".join(f"--{o}" for o in source.options) or "no options"
        raise TradeError(f"source '{name}' does not take --{unknown[0]}", hint=f"it takes {takes}")
    if from_file is not None:
        if given:
            raise TradeError("--start/--end choose what to fetch; with --from-file the file decides")
        if not Path(from_file).is_file():
            raise TradeError(f"{from_file}: no such file", hint="pass the file downloaded from the source's URL")
        return source.convert(Path(from_file), out)
    with _workdir(keep_download, out) as workdir:
        return source.convert(source.fetch(workdir, given), out)


@contextlib.contextmanager
def _workdir(keep: Path | None, out: Path) -> Iterator[Path]:
    """``keep`` when given, else a temporary folder beside ``out`` (same disk, often larger than /tmp)."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.download-") as tmp:
        yield Path(tmp)


def offline_hint(name: str) -> str:
    """What to do instead on a machine without internet access."""
    return (
        "fetch the file on a machine with internet access, copy it here and run "
        f"`trade data download --source {name} --from-file FILE --out DIR`"
    )


def fetch_url(url: str, dest: Path, source: str) -> Path:
    """Download ``url`` to ``dest`` with a progress bar; a network failure is one line suggesting --from-file."""
    partial = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as handle:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name) as bar:
                while chunk := response.read(1 << 20):
                    handle.write(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as exc:
        partial.unlink(missing_ok=True)
        raise TradeError(f"cannot download {url}: HTTP {exc.code} {exc.reason}", hint=offline_hint(source)) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "reason", exc)
        raise TradeError(
            f"cannot download {url} ({reason}): this machine may be offline", hint=offline_hint(source)
        ) from exc
    partial.replace(dest)
    return dest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _refuse_unsafe_name(artifact: Path, name: str) -> None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise TradeError(f"{artifact}: refusing unsafe member {name!r} (absolute path or '..')")


def _extract_zip(artifact: Path, dest: Path) -> None:
    """Unzip after checking every name first, so a zip-slip member writes nothing at all."""
    with zipfile.ZipFile(artifact) as archive:
        for name in archive.namelist():
            _refuse_unsafe_name(artifact, name)
        for member in tqdm(archive.infolist(), desc="unzipping", unit="file"):
            archive.extract(member, dest)


def _extract_tar(artifact: Path, dest: Path) -> None:
    """Untar with tarfile's ``data`` filter, checking every member first so a bad one writes nothing.

    The filter would quietly strip a leading ``/``; such a member is refused too, like in a zip.
    """
    with tarfile.open(artifact) as archive:
        members = archive.getmembers()
        try:
            for member in members:
                _refuse_unsafe_name(artifact, member.name)
                tarfile.data_filter(member, str(dest))
        except tarfile.FilterError as exc:
            raise TradeError(f"{artifact}: refusing unsafe member ({exc})") from exc
        archive.extractall(dest, members=tqdm(members, desc="untarring", unit="file"), filter="data")


def _provider_root(folder: Path, artifact: Path) -> Path:
    """The one folder (at most 3 levels down) holding ``calendars/day.txt``: archives nest it differently."""
    found = [p.parent.parent for depth in range(4) for p in folder.glob("*/" * depth + "calendars/day.txt")]
    if len(found) != 1:
        what = "no Qlib provider dir" if not found else f"{len(found)} Qlib provider dirs"
        raise TradeError(
            f"{artifact}: {what} (a folder with calendars/day.txt, instruments/all.txt and features/)",
            hint="pass the archive the source's URL serves",
        )
    return found[0]


def _check_provider(root: Path, artifact: Path) -> None:
    """Read the calendar and instruments and require features for at least one listed symbol."""
    from trade_data.qlib_dir import read_calendar_file, read_instruments_file

    read_calendar_file(root / "calendars" / "day.txt")
    symbols = read_instruments_file(root / "instruments" / "all.txt")["symbol"]
    if not any((root / "features" / str(s).lower()).is_dir() for s in symbols):
        raise TradeError(f"{artifact}: no features/<symbol>/ folder for any symbol in instruments/all.txt")


def install_provider_dir(artifact: Path, out: Path, extract: Callable[[Path, Path], None], meta: DatasetMeta) -> Path:
    """Extract into a staging folder beside ``out``, check it, add ``trade.json`` and swap it into place."""
    from trade_data.qlib_dir import staging_folder, swap_into_place, write_meta

    with staging_folder(out) as staging:
        try:
            extract(artifact, staging)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
            raise TradeError(
                f"{artifact}: not a readable archive ({exc})", hint="a partial download? fetch it again"
            ) from exc
        root = _provider_root(staging, artifact)
        _check_provider(root, artifact)
        write_meta(root, meta)
        swap_into_place(root, out)
    return out


@dataclass(frozen=True)
class ArchiveSource(DataSource):
    """A zip or tar.gz of a ready Qlib provider dir served at ``origin``."""

    name: str
    description: str
    origin: str
    archive: Literal["zip", "tar"]
    options: Mapping[str, str] = field(default_factory=dict)

    def fetch(self, workdir: Path, options: Mapping[str, str]) -> Path:
        return fetch_url(self.origin, workdir / self.origin.rsplit("/", 1)[-1], self.name)

    def convert(self, artifact: Path, out: Path) -> Path:
        from trade_data.qlib_dir import DatasetMeta

        meta = DatasetMeta(
            synthetic=False,
            source=f"download:{self.name}",
            parameters={"url": self.origin, "file": artifact.name, "sha256": _sha256(artifact)},
        )
        extract = _extract_zip if self.archive == "zip" else _extract_tar
        return install_provider_dir(artifact, Path(out), extract, meta)


BAOSTOCK_BARS = "date,code,open,high,low,close,preclose,volume,amount,adjustflag,turn,tradestatus,pctChg,isST"
BAOSTOCK_FACTORS = ["code", "date", "foreAdjustFactor", "backAdjustFactor", "adjustFactor"]
"""query_adjust_factor's columns, with ``dividOperateDate`` (the ex-date) renamed ``date`` to join the bars."""
BAOSTOCK_NEEDED = ("date", "code", "open", "high", "low", "close", "volume", "backAdjustFactor")
CSI300_INDEX = "sh.000300"
_FIRST_TRADING_DAY = "1990-12-19"
"""Factor events are fetched from here: before a stock's first event its backward factor is 1."""


def _baostock() -> Any:
    try:
        import baostock
    except ImportError as exc:
        raise TradeError(
            "the baostock source needs the baostock package", hint="pip install 'trade-data[baostock]'"
        ) from exc
    return baostock


def _rows(result: Any, what: str) -> list[list[str]]:
    """Every row of a baostock result set (it pages behind ``next()``); an error code is one line."""
    rows = []
    while result.error_code == "0" and result.next():
        rows.append(result.get_row_data())
    if result.error_code != "0":
        raise TradeError(f"baostock {what}: {result.error_msg} (code {result.error_code})")
    return rows


def _csi300_snapshots(bs: Any, start: str, end: str) -> dict[str, set[str]]:
    """CSI300 members by baostock's ``updateDate``, sampled monthly: a rebalance shows up under its own date."""
    import pandas as pd

    days = {start, *(f"{d:%Y-%m-%d}" for d in pd.date_range(start, end, freq="MS"))}
    snapshots: dict[str, set[str]] = {}
    for day in sorted(days):
        for update, code, _name in _rows(bs.query_hs300_stocks(date=day), f"CSI300 members on {day}"):
            snapshots.setdefault(update, set()).add(code)
    return snapshots


def _member_flags(bars: pd.DataFrame, snapshots: dict[str, set[str]]) -> list[int]:
    """1 where the row's code was in the latest CSI300 list updated on or before the row's date."""
    import numpy as np

    updates = sorted(snapshots)
    latest = np.searchsorted(updates, bars["date"].to_numpy(), side="right") - 1
    return [int(i >= 0 and code in snapshots[updates[i]]) for i, code in zip(latest, bars["code"], strict=True)]


def _csi300_intervals(table: pd.DataFrame, member: pd.Series) -> pd.DataFrame:
    """Membership intervals from per-row flags: one interval per run of consecutive trading days."""
    import numpy as np
    import pandas as pd

    calendar = pd.DatetimeIndex(sorted(table["date"].unique()))
    rows = table.loc[member.to_numpy(bool), ["symbol", "date"]].sort_values(["symbol", "date"])
    position = calendar.get_indexer(rows["date"])
    new_run = (rows["symbol"] != rows["symbol"].shift()).to_numpy() | (np.diff(position, prepend=-2) != 1)
    runs = rows.groupby(np.cumsum(new_run))
    return runs.agg(symbol=("symbol", "first"), start=("date", "min"), end=("date", "max")).reset_index(drop=True)


@dataclass(frozen=True)
class BaostockSource(DataSource):
    """CSI300 members and the CSI300 index from baostock's free API: raw prices plus backward factors.

    The artifact is one CSV in baostock's own columns: the daily bars (``adjustflag=3``, raw
    prices), ``hs300`` (1 on days the stock was a member), and ``query_adjust_factor``'s rows
    joined on the ex-date; factor events outside the bars' range are rows without prices.
    """

    name: str = "baostock"
    description: str = "CSI300 members + index, raw daily bars and backward factors via the baostock API"
    origin: str = "the baostock API (public-api.baostock.com:10030); needs pip install 'trade-data[baostock]'"
    options: Mapping[str, str] = field(
        default_factory=lambda: {"start": "first date, default 2015-01-01", "end": "last date, default today"}
    )

    def fetch(self, workdir: Path, options: Mapping[str, str]) -> Path:
        import pandas as pd

        bs = _baostock()
        start, end = options.get("start", "2015-01-01"), options.get("end", f"{dt.date.today():%Y-%m-%d}")
        login = bs.login()
        if login.error_code != "0":
            raise TradeError(
                f"baostock login failed ({login.error_msg}): this machine may be offline", hint=offline_hint(self.name)
            )
        try:
            snapshots = _csi300_snapshots(bs, start, end)
            bars, events = [], []
            for code in tqdm([*sorted(set().union(*snapshots.values())), CSI300_INDEX], desc="baostock", unit="code"):
                query = bs.query_history_k_data_plus(code, BAOSTOCK_BARS, start, end, frequency="d", adjustflag="3")
                bars += _rows(query, f"bars of {code}")
                if code != CSI300_INDEX:  # an index has no corporate actions
                    events += _rows(bs.query_adjust_factor(code, _FIRST_TRADING_DAY, end), f"factors of {code}")
        finally:
            bs.logout()
        frame = pd.DataFrame(bars, columns=BAOSTOCK_BARS.split(","))
        frame["hs300"] = _member_flags(frame, snapshots)
        merged = frame.merge(pd.DataFrame(events, columns=BAOSTOCK_FACTORS), on=["code", "date"], how="outer")
        merged["hs300"] = merged["hs300"].astype("Int64")  # stays 0/1 next to the factor-only rows
        path = workdir / f"baostock_csi300_{start}_{end}.csv"
        merged.sort_values(["code", "date"]).to_csv(path, index=False)
        return path

    def convert(self, artifact: Path, out: Path) -> Path:
        import pandas as pd

        from trade_data.errors import DataValidationError
        from trade_data.qlib_dir import DatasetMeta, write_dataset

        try:
            raw = pd.read_csv(artifact, dtype={"code": str, "date": str})
            missing = [c for c in BAOSTOCK_NEEDED if c not in raw]
            if missing:
                raise DataValidationError(f"{artifact}: missing baostock columns {', '.join(missing)}")
            raw["date"] = pd.to_datetime(raw["date"], format="%Y-%m-%d")
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataValidationError(f"{artifact}: not a baostock CSV ({exc})") from exc
        raw = raw.sort_values(["code", "date"], kind="stable")
        raw["factor"] = raw.groupby("code")["backAdjustFactor"].ffill().fillna(1.0)
        bars = raw.dropna(subset=["close"])  # factor events without a bar, and placeholder rows without prices
        table = bars[["date", "open", "high", "low", "close", "volume", "factor"]].assign(
            symbol=bars["code"].str.replace(".", "", regex=False).str.upper()
        )
        universes = {"csi300": _csi300_intervals(table, bars["hs300"] == 1)} if "hs300" in bars else {}
        meta = DatasetMeta(
            synthetic=False,
            source=f"download:{self.name}",
            parameters={"origin": self.origin, "file": artifact.name, "sha256": _sha256(artifact), "adjustflag": "3"},
        )
        return write_dataset(table, Path(out), meta=meta, universes=universes, source=str(artifact), progress=True)


BUILTIN_SOURCES: tuple[DataSource, ...] = (
    ArchiveSource(
        name="qlib-cn",
        description="Qlib's official cn 1d data (what `python -m qlib.run.get_data qlib_data --region cn` gets)",
        origin="https://github.com/SunsetWolf/qlib_dataset/releases/download/v2/qlib_data_cn_1d_latest.zip",
        archive="zip",
    ),
    ArchiveSource(
        name="qlib-community",
        description="chenditc/investment_data's daily-updated community Qlib cn data",
        origin="https://github.com/chenditc/investment_data/releases/latest/download/qlib_bin.tar.gz",
        archive="tar",
    ),
    BaostockSource(),
)
