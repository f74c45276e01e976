"""The run folder: the one layout every command that plays or trains writes and every reader opens.

- A backtest (``trade eval backtest``): :data:`MANIFEST` (a :class:`Manifest`), :data:`TRAJECTORIES`,
  :data:`DAYS` (a :class:`DayRecord` a line) and :data:`SUMMARY` (a :class:`BacktestSummary`); ``--seeds``
  writes its runs in ``seed-<s>`` folders and their spread in :data:`SEEDS` beside them.
- A tasks run (``trade eval tasks``): :data:`MANIFEST` (a :class:`TasksManifest`), :data:`TRAJECTORIES`,
  :data:`EPISODES` (an :class:`EpisodeRecord` a line) and :data:`SUMMARY` (a :class:`TasksSummary`).
- A training run (verl, trl-grpo): :data:`METRICS` (one line per step) and each step's Trajectories in
  :func:`step_file` (``rollouts/trajectories/{step}.jsonl``; a verl rollout folder given alone holds
  ``trajectories/{step}.jsonl``).

The JSONL files grow one whole line at a time (one write, flushed; fsynced at once by
:func:`~trade_core.files.append_line`, or in groups by an :class:`~trade_core.files.Appender`), a trajectory
before its record, so a killed run leaves at most one partial
last line and trajectories without a record: :func:`open_run` with ``resume`` keeps what a resume can trust and
cuts the rest away. One process writes a folder at a time (:func:`writer_lock`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from trade_core.errors import TradeError, error_line
from trade_core.files import atomic_write, ends_inside_line, lock_file, read_lines
from trade_core.hookspecs import RunKind
from trade_data.qlib_dir import META_FILE
from trade_data.signals import describe_dataset
from trade_tools.grading import Reward
from trade_tools.rules import ExecutionRules

if TYPE_CHECKING:
    from trade_data.store import MarketStore
    from trade_tools.episode import Episode

MANIFEST, TRAJECTORIES, SUMMARY = "manifest.json", "trajectories.jsonl", "summary.json"
DAYS, EPISODES = "days.jsonl", "episodes.jsonl"
"""The records of a backtest's days and of a tasks run's episodes."""
SEEDS = "seeds.json"
"""The spread over seeds that ``--seeds K`` writes in the parent of its ``seed-<s>`` run folders."""
METRICS = "metrics.jsonl"
"""A training run's metrics, one line per step (trl-grpo writes it; verl's file logger too, pointed there)."""
ROLLOUTS, STEPS = "rollouts", "trajectories"
"""A training run's rollout folder (verl's ``rollout_data_dir``), and the folder of ``{step}.jsonl`` in it."""
STEP_FOLDERS = (f"{ROLLOUTS}/{STEPS}", STEPS)
"""Where a training run's ``{step}.jsonl`` are: in a run folder, or in a rollout folder given alone."""
TRAJECTORY_LAYOUTS = (TRAJECTORIES, f"{STEPS}/*.jsonl", f"{ROLLOUTS}/{STEPS}/*.jsonl")
"""Where a folder keeps trajectories, in the order they are looked for: a backtest's or tasks run's file, then a
rollout folder's steps, then a training run's."""
LOCK = ".writer.lock"
"""Held by the process writing the folder; holds its pid."""
FORMAT = 1


def step_file(rollouts: Path, step: int) -> Path:
    """The Trajectories of training step ``step`` in a rollout folder (a run folder's :data:`ROLLOUTS`)."""
    return Path(rollouts) / STEPS / f"{step}.jsonl"


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


class DayUsage(BaseModel):
    """What a policy spent playing a day or an episode (zero for baselines): its requests, retries and tokens."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    warnings: list[str] = Field(default_factory=list, description="e.g. tool-call markup returned as plain text")


class Usage(DayUsage):
    """What playing a day or an episode took: what the policy spent and the Episode's counts. The fields of
    every record, flat in its line."""

    tool_calls: int
    tool_errors: int
    turns: int

    @classmethod
    def of(cls, episode: Episode, spent: DayUsage) -> Usage:
        """The Episode's counts with what the policy reports it spent (its requests, retries, tokens, warnings)."""
        counts = {"tool_calls": episode.tool_calls, "tool_errors": episode.tool_errors, "turns": episode.turns}
        return cls(**counts, **spent.model_dump())


class DayRecord(Usage):
    """One finished day of a backtest (a line of days.jsonl)."""

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
    trajectory_id: str


class EpisodeRecord(Usage):
    """One finished episode of a tasks run (a line of episodes.jsonl)."""

    task_id: str
    sample: int = Field(description="which of the task's --samples (0-based)")
    date: dt.date
    status: Literal["done", "failed"] = Field(description="failed: the policy could not play (server down)")
    episode_status: str
    reason: str = Field("", description="the server failure (English), or why the episode did not stop (Chinese)")
    server: str | None = None
    rewards: dict[str, Reward] = Field(default_factory=dict, description="by scheme; none for a failed episode")
    buys: int = Field(0, description="accepted buy orders")
    top_buys: int | None = Field(
        None, description="of them, buys of the pool's top stock by the dataset's planted signal (None: no signal)"
    )
    trajectory_id: str


class BacktestSummary(BaseModel):
    """summary.json of a backtest: each portfolio's metrics (the policy's row first, then the baselines and the
    CSI300), their NAVs from the base close on, and how the metrics were computed. An undefined metric is
    written as it was computed (NaN), as json.dumps writes it."""

    model_config = ConfigDict(ser_json_inf_nan="constants")

    conventions: dict[str, Any]
    rows: dict[str, dict[str, Any]] = Field(description="metrics by portfolio, keyed as trade_eval.metrics names them")
    nav: dict[str, list[Any]] = Field(description='"dates", then each portfolio\'s NAV on them')


class TasksSummary(BaseModel):
    """summary.json of a tasks run: rewards over the episodes played, the rest over every episode; each ``*_ci``
    is the interval of the value before it, drawn as ``interval_method`` says."""

    episodes: int
    played: int
    failed: int
    mean_reward: dict[str, float | None] = Field(description="by scheme")
    mean_reward_ci: dict[str, list[float] | None]
    stop_rate: float | None
    stop_rate_ci: list[float] | None
    tool_error_rate: float | None
    tool_error_rate_ci: list[float] | None
    buys_per_episode: float | None
    exploit_share: float | None = Field(description="of the buys, those of the top stock by a planted signal")
    exploit_share_ci: list[float] | None
    interval_method: str
    failure_reasons: dict[str, int]
    turns_per_episode: float | None
    prompt_tokens_per_episode: float | None
    completion_tokens_per_episode: float | None
    requests: int
    retries: int
    servers: dict[str, int] = Field(description="episodes per server")


class RunManifest(BaseModel):
    """What a run of a policy is: the fields every kind shares. Everything but :attr:`UNCHECKED`, the paths and
    the dataset's description must match for ``--resume`` (:meth:`settings`)."""

    UNCHECKED: ClassVar[frozenset[str]] = frozenset({"command", "versions", "created_at", "model_cutoff"})
    RECORDS: ClassVar[str]
    """The file of the run's records, a line per finished day or episode ..."""
    RECORD: ClassVar[type[DayRecord | EpisodeRecord]]
    """... each one of these."""
    SUMMARY: ClassVar[type[BacktestSummary | TasksSummary]]
    """What the finished run's summary.json holds."""

    format: Literal[1] = FORMAT
    kind: Literal["backtest", "tasks"]
    command: list[str]
    policy: str
    model: str
    sampling: Sampling
    options: dict[str, Any] = Field(default_factory=dict, description="the policy's --set options")
    anonymized: bool = Field(False, description="the model saw aliases for symbols and dates (--anonymize)")
    model_cutoff: str | None = Field(None, description="the model's pretraining cutoff YYYY-MM, as the user gave it")
    data: DataRef
    versions: dict[str, str]
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))

    def settings(self) -> dict[str, Any]:
        """The fields a resumed run must share with the run it continues."""
        fields = self.model_dump(mode="json", exclude=set(self.UNCHECKED))
        fields["data"].pop("path")
        fields["data"].pop("description", None)  # the fingerprint covers trade.json, which it is read from
        return fields

    def continues(self, done: list[Any], record: Any) -> bool:
        """Whether ``record`` may follow ``done`` in a run a resume continues."""
        return True


class Manifest(RunManifest):
    """What a backtest is."""

    RECORDS: ClassVar[str] = DAYS
    RECORD: ClassVar[type[DayRecord]] = DayRecord
    SUMMARY: ClassVar[type[BacktestSummary]] = BacktestSummary

    kind: Literal["backtest"] = "backtest"
    base_url: str | None
    start_date: dt.date
    num_days: int
    dates: list[dt.date] = Field(description="the planned trading days")
    initial_cash: float
    pool: PoolSpec
    max_turns: int
    rules: ExecutionRules

    def continues(self, done: list[Any], record: Any) -> bool:
        """The days follow the planned dates, one after the other."""
        return len(done) < len(self.dates) and record.date == self.dates[len(done)]


class TasksRef(BaseModel):
    path: str
    split: str
    count: int = Field(description="tasks evaluated (after --limit)")
    fingerprint: str = Field(description="hash of their task ids, in order")


class TasksManifest(RunManifest):
    """What a tasks run is; its servers and the tasks' path may change on ``--resume`` too."""

    UNCHECKED: ClassVar[frozenset[str]] = RunManifest.UNCHECKED | {"base_urls"}
    RECORDS: ClassVar[str] = EPISODES
    RECORD: ClassVar[type[EpisodeRecord]] = EpisodeRecord
    SUMMARY: ClassVar[type[TasksSummary]] = TasksSummary

    kind: Literal["tasks"] = "tasks"
    base_urls: list[str]
    tasks: TasksRef
    samples: int
    schemes: dict[str, dict[str, Any]] = Field(description="each scheme's settings; the first fills Trajectory.reward")
    weights: list[float]

    def settings(self) -> dict[str, Any]:
        fields = super().settings()
        fields["tasks"].pop("path")
        return fields


MANIFESTS: dict[str, type[RunManifest]] = {"backtest": Manifest, "tasks": TasksManifest}
_ANY_MANIFEST: TypeAdapter[Manifest | TasksManifest] = TypeAdapter(
    Annotated[Manifest | TasksManifest, Field(discriminator="kind")]
)


def write_json(path: Path, value: BaseModel | dict[str, Any]) -> None:
    text = value.model_dump_json(indent=2) if isinstance(value, BaseModel) else json.dumps(value, indent=2)
    atomic_write(path, text + "\n")


def kind_of(folder: Path) -> RunKind | None:
    """What run ``folder`` holds: a tasks run's records, else the ``kind`` its manifest states (a run just
    started has nothing else), else a backtest's files, else a training run's. None: no run (a ``trade data
    tasks`` folder's manifest states no kind). A manifest that cannot be read is taken for a backtest's, shown
    with its problem, as are days and trajectories beside a manifest without a kind."""
    if (folder / EPISODES).exists():
        return "tasks"
    unreadable = False
    if (folder / MANIFEST).is_file():
        try:
            kind = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("kind")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            kind, unreadable = None, True
        if kind in MANIFESTS:
            return kind
    if unreadable or (folder / DAYS).exists() or (folder / TRAJECTORIES).exists():
        return "backtest"
    if (folder / METRICS).exists() or any((folder / sub).is_dir() for sub in STEP_FOLDERS):
        return "training"
    return None


def read_summary(out: Path, kind: str) -> BacktestSummary | TasksSummary:
    """The summary.json of a ``kind`` run, or a one-line error (OSError, ValueError) saying why it is not one."""
    text = (out / SUMMARY).read_bytes()
    model = MANIFESTS[kind].SUMMARY
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        if error.errors()[0]["type"] == "json_invalid":
            raise ValueError(f"{SUMMARY}: unreadable ({error_line(error)})") from None
        raise ValueError(f"{SUMMARY}: not a {kind} summary ({error_line(error)})") from None


def read_manifest(out: Path, model: type[RunManifest] = Manifest) -> RunManifest:
    """The run's manifest, as ``model`` (a one-line error for a folder without one, or with another's)."""
    path = out / MANIFEST
    if not path.is_file():
        raise TradeError(f"{out} has no {MANIFEST}: nothing to resume", hint="run without --resume to start it")
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as error:
        kind = model.model_fields["kind"].default
        raise TradeError(
            f"{path} is not a {kind} manifest ({error_line(error)})", hint="run without --resume to start it"
        ) from None


def read_run_manifest(out: Path) -> Manifest | TasksManifest:
    """The manifest of a backtest or tasks run, typed by the kind it states; a one-line error for a folder that
    holds no such manifest (or one that cannot be read)."""
    try:
        return _ANY_MANIFEST.validate_json((out / MANIFEST).read_bytes())
    except (OSError, ValidationError) as error:
        raise TradeError(
            f"{out} is not a backtest or tasks run folder (needs a readable {MANIFEST}: {error_line(error)})",
            hint="pass the --out folder of a `trade eval backtest` or `trade eval tasks` run",
        ) from None


def open_run(out: Path, manifest: RunManifest, *, resume: bool) -> list[Any]:
    """Start the run folder (writing the manifest), or check it is this run and return its finished records."""
    if resume:
        stored = read_manifest(out, type(manifest))
        mine, theirs = manifest.settings(), stored.settings()
        if mine != theirs:
            differ = [key for key in mine if mine[key] != theirs.get(key)]
            raise TradeError(
                f"{out} was started with other settings ({', '.join(differ)} differ)",
                hint="resume with the flags it was started with, or choose another --out",
            )
        return finished_records(out, manifest)
    if (out / MANIFEST).exists() or (out / manifest.RECORDS).exists():
        raise TradeError(f"{out} already holds a run", hint="pass --resume to continue it, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / MANIFEST, manifest)
    return []


def finished_records(out: Path, manifest: RunManifest) -> list[Any]:
    """The records a resume continues after, with the files cut to them: the records file up to its first line
    that is partial, unreadable or out of order (:meth:`RunManifest.continues`), and trajectories.jsonl to the
    lines those records name."""
    records: list[Any] = []
    path = out / manifest.RECORDS
    lines = read_lines(path)
    for line in lines:
        try:
            record = manifest.RECORD.model_validate_json(line)
        except ValidationError:
            break
        if not manifest.continues(records, record):
            break
        records.append(record)
    if len(records) < len(lines) or ends_inside_line(path):
        atomic_write(path, "".join(line + "\n" for line in lines[: len(records)]))
    ids = {record.trajectory_id for record in records}
    trajectories = read_lines(out / TRAJECTORIES)
    wanted = [line for line in trajectories if trajectory_id_of(line) in ids]
    if len(wanted) < len(trajectories) or ends_inside_line(out / TRAJECTORIES):
        atomic_write(out / TRAJECTORIES, "".join(line + "\n" for line in wanted))
    return records


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
