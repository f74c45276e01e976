"""A backtest's run folder: ``manifest.json``, ``trajectories.jsonl``, ``days.jsonl`` and ``summary.json``.

The JSONL files grow one whole line at a time (one write, flushed; fsynced at once by :func:`append_line`, or
in groups by an :class:`Appender`), the trajectory of a day before its :class:`DayRecord`, so a killed run
leaves at most one partial last line and trajectories whose day has no record: :func:`finished_days` reads
what a resume can trust and cuts the rest away. One process writes a folder at a time (:func:`writer_lock`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from pydantic import BaseModel, Field, ValidationError

from trade_core.errors import TradeError, error_line
from trade_core.files import atomic_write, lock_file
from trade_data.qlib_dir import META_FILE
from trade_data.signals import describe_dataset
from trade_tools.rules import ExecutionRules

if TYPE_CHECKING:
    from trade_data.store import MarketStore

MANIFEST, DAYS, TRAJECTORIES, SUMMARY = "manifest.json", "days.jsonl", "trajectories.jsonl", "summary.json"
LOCK = ".writer.lock"
"""Held by the process writing the folder; holds its pid."""
FORMAT = 1


class Sampling(BaseModel):
    temperature: float
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int = 0


class PoolSpec(BaseModel):
    """How the run's pool was chosen (``size`` drawn from ``universe`` with ``seed``, or read from ``file``)."""

    size: int | None = None
    file: str | None = None
    universe: str
    seed: int
    symbols: list[str] = Field(description="the run's pool: drawn on the first day or read from the file")


def data_fingerprint(path: Path) -> str:
    """A short hash of the dataset's provenance (trade.json, rewritten by every import with its time and row
    count), its calendar and its universes: any import or new universe changes it; reading costs microseconds."""
    digest = hashlib.sha256()
    files = [path / META_FILE, path / "calendars" / "day.txt", *sorted((path / "instruments").glob("*.txt"))]
    for file in files:
        digest.update(file.name.encode() + b"\0")
        digest.update(file.read_bytes() if file.is_file() else b"(none)")
    return digest.hexdigest()[:16]


class DataRef(BaseModel):
    path: str
    fingerprint: str
    description: str = Field(
        "", description="'real market data', 'synthetic', 'synthetic, planted signal KMID, IC 0.2'"
    )

    @classmethod
    def of(cls, data: Path | str, store: MarketStore) -> DataRef:
        """The dataset at ``data`` as a run records it."""
        meta = store.meta
        return cls(
            path=str(Path(data).resolve()),
            fingerprint=data_fingerprint(store.path),
            description=describe_dataset(meta.synthetic, meta.parameters),
        )


class Manifest(BaseModel):
    """What a run is. Everything but ``command``, ``versions``, ``created_at``, ``model_cutoff`` and
    ``data.path`` must match for ``--resume`` (:meth:`settings`)."""

    format: Literal[1] = FORMAT
    kind: Literal["backtest"] = "backtest"
    command: list[str]
    policy: str
    model: str
    base_url: str | None
    sampling: Sampling
    options: dict[str, Any] = Field(default_factory=dict, description="the policy's --set options")
    start_date: dt.date
    num_days: int
    dates: list[dt.date] = Field(description="the planned trading days")
    initial_cash: float
    pool: PoolSpec
    max_turns: int
    anonymized: bool = Field(False, description="the model saw aliases for symbols and dates (--anonymize)")
    model_cutoff: str | None = Field(None, description="the model's pretraining cutoff YYYY-MM, as the user gave it")
    rules: ExecutionRules
    data: DataRef
    versions: dict[str, str]
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))

    def settings(self) -> dict[str, Any]:
        """The fields a resumed run must share with the run it continues."""
        fields = self.model_dump(mode="json", exclude={"command", "versions", "created_at", "model_cutoff"})
        fields["data"].pop("path")
        fields["data"].pop("description", None)  # the fingerprint covers trade.json, which it is read from
        return fields


class DayRecord(BaseModel):
    """One finished day of a run (a line of days.jsonl)."""

    date: dt.date
    index: int = Field(description="position in the manifest's dates (0-based)")
    status: Literal["done", "failed"] = Field(description="failed: the policy could not play; portfolio held")
    episode_status: Literal["stopped", "truncated", "failed"]
    reason: str = Field("", description="why the day did not stop normally (Chinese), or the failure (English)")
    nav: float = Field(description="CNY at the day's close after its trades and corporate actions")
    cash: float
    holdings: dict[str, int]
    cost: dict[str, float] = Field(default_factory=dict, description="average cost per share carried on")
    value_before: float = Field(description="the morning portfolio at the day's close, dividends included")
    dividends: float = Field(0.0, description="cash settled for corporate actions since the previous close")
    fees: float
    costs: float = Field(description="fees plus slippage")
    turnover: float = Field(description="gross traded / value_before")
    orders: int
    refused: int
    tool_calls: int
    tool_errors: int
    turns: int
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    trajectory_id: str
    warnings: list[str] = Field(default_factory=list)


def append_line(path: Path, text: str) -> None:
    """Append one line with a single write, flushed and fsynced before returning."""
    with open(path, "ab") as handle:
        handle.write(text.encode("utf-8") + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


class Appender:
    """Appends whole lines to a run's JSONL files, each with one write and a flush (a killed process loses no
    finished line), but fsyncs them at most every ``every`` seconds and on close (a power cut loses at most
    that much): an fsync per line of hundreds of episodes a second costs more than the episodes. The files are
    fsynced in the order they were first written, so a synced record never names an unsynced trajectory."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.handles: dict[Path, BinaryIO] = {}
        self.synced = time.monotonic()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sync()
        for handle in self.handles.values():
            handle.close()

    def append(self, path: Path, text: str) -> None:
        if path not in self.handles:
            self.handles[path] = open(path, "ab")  # noqa: SIM115 - closed in __exit__
        handle = self.handles[path]
        handle.write(text.encode("utf-8") + b"\n")
        handle.flush()
        if time.monotonic() - self.synced >= self.every:
            self.sync()

    def sync(self) -> None:
        for handle in self.handles.values():
            os.fsync(handle.fileno())
        self.synced = time.monotonic()


def write_json(path: Path, value: BaseModel | dict[str, Any]) -> None:
    text = value.model_dump_json(indent=2) if isinstance(value, BaseModel) else json.dumps(value, indent=2)
    atomic_write(path, text + "\n")


def read_manifest(out: Path) -> Manifest:
    path = out / MANIFEST
    if not path.is_file():
        raise TradeError(f"{out} has no {MANIFEST}: nothing to resume", hint="run without --resume to start it")
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise TradeError(f"{path} is not a backtest manifest ({error_line(error)})") from None


def finished_days(out: Path, dates: list[dt.date]) -> list[DayRecord]:
    """The DayRecords a resume continues after, with the files cut to them: days.jsonl up to its first line
    that is partial, unreadable or out of order, and trajectories.jsonl to the lines those records name."""
    records: list[DayRecord] = []
    kept: list[str] = []
    lines = read_lines(out / DAYS)
    for line in lines:
        try:
            record = DayRecord.model_validate_json(line)
        except ValidationError:
            break
        if len(records) >= len(dates) or record.date != dates[len(records)]:
            break
        records.append(record)
        kept.append(line)
    if len(kept) < len(lines) or ends_inside_line(out / DAYS):
        atomic_write(out / DAYS, "".join(line + "\n" for line in kept))
    ids = {record.trajectory_id for record in records}
    trajectories = read_lines(out / TRAJECTORIES)
    wanted = [line for line in trajectories if trajectory_id_of(line) in ids]
    if len(wanted) < len(trajectories) or ends_inside_line(out / TRAJECTORIES):
        atomic_write(out / TRAJECTORIES, "".join(line + "\n" for line in wanted))
    return records


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []


def ends_inside_line(path: Path) -> bool:
    """Whether the file ends inside a line (a write cut short)."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


def trajectory_id_of(line: str) -> str | None:
    try:
        found = json.loads(line)
    except json.JSONDecodeError:
        return None
    return found.get("id") if isinstance(found, dict) else None


@contextlib.contextmanager
def writer_lock(out: Path) -> Iterator[None]:
    """Hold ``out`` for this process's writes, creating the folder: a second writer (a ``--resume`` while the
    run still goes) would append its lines among the first's. The lock is an ``flock`` on ``out/.writer.lock``,
    which the kernel frees when the holder dies (a killed run's lock is taken over by the next); the file
    holds the holder's pid for the refusal, and is removed on release, with ``out`` if this made it and it
    is still empty (a refused ``--resume`` of a folder that does not exist leaves nothing)."""
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK
    try:
        fd = lock_file(path, wait=False)
    except BlockingIOError:
        holder = path.read_text(encoding="utf-8", errors="replace").strip() or "?"
        hint = "wait for it to end, or stop it, then --resume"
        raise TradeError(f"{out} is being written by process {holder}", hint=hint) from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()
