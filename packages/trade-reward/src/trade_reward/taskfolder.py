"""A tasks folder, the trainer-neutral output of ``trade data tasks``: ``{split}.jsonl`` and ``manifest.json``.

Each JSONL line is a :class:`TaskRecord`: the task, its ground truth and the prompt the Episode renders for
it. Trainers turn records into their own formats (the verl trainer writes verl's parquet rows into its run
folder), evaluation reads them as they are. The folder is written beside OUT and swapped into place, so a
failure leaves OUT as it was.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from trade_core.errors import TradeError, error_line
from trade_core.files import staging_path
from trade_data.qlib_dir import swap_into_place
from trade_reward.forward import HORIZON
from trade_tools.episode import Task
from trade_tools.grading import GroundTruth
from trade_tools.sampler import CAPITAL, MAX_HOLDINGS, WEIGHT_RANGE

MANIFEST = "manifest.json"
FORMAT_VERSION = 2
"""2: each record carries its prompt and no trainer format is written (1 wrote verl's parquet beside it)."""
REBUILD = "rebuild the folder with `trade data tasks`"


class TaskRecord(BaseModel):
    """One line of ``{split}.jsonl``."""

    index: int
    split: str
    task: Task
    ground_truth: GroundTruth
    prompt: list[dict[str, str]]
    """the system and user messages the Episode renders for the task (point in time)"""


class SplitSummary(BaseModel):
    """What one split file holds."""

    name: str
    start: dt.date
    end: dt.date
    days: int
    tasks: int
    first_t0: dt.date
    last_t0: dt.date


class SamplerSettings(BaseModel):
    """The sampler's settings, recorded so a tasks folder says how it was drawn."""

    pool_size: tuple[int, int]
    per_day: int
    capital: float = CAPITAL
    max_holdings: int = MAX_HOLDINGS
    holding_weight: tuple[float, float] = WEIGHT_RANGE
    lot_size: int
    star_min_shares: int
    cost_basis: str = (
        "previous close on T0's price basis (the raw close of the last traded day before T0; on an ex-date the "
        "exchanges' ex-right reference)"
    )
    horizon: int = HORIZON


class Manifest(BaseModel):
    """``manifest.json``: where the tasks came from and what each split holds."""

    format_version: Literal[2] = FORMAT_VERSION
    dataset: str = Field(description="the dataset, relative to the tasks folder, so both can move together")
    synthetic: bool
    dataset_source: str
    universe: str
    seed: int
    sampler: SamplerSettings
    splits: list[SplitSummary]
    anonymized: bool = Field(False, description="every task shows aliases for symbols and dates (--anonymize)")
    tools: list[str] | None = Field(None, description="the tools every task offers (--tools); None: the default four")
    prompt_set: str | None = Field(None, description="the prompt set of every task (--prompt-set); None: default")

    def dataset_in(self, folder: Path) -> Path:
        """The dataset of the tasks folder at ``folder``, wherever the command runs from."""
        return (Path(folder) / self.dataset).resolve()

    def describe(self) -> str:
        """'SYNTHETIC market ...' or 'real market data', for the first line of a summary."""
        return "SYNTHETIC market (not real data)" if self.synthetic else "real market data"


def check_out(out: Path) -> None:
    """Refuse to replace anything but a tasks folder (or an empty one): OUT is swapped wholesale."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
        raise TradeError(f"{out} exists and is not a tasks folder", hint="choose a new or empty folder for --out")


def write_split(folder: Path, name: str, records: list[TaskRecord]) -> None:
    (folder / f"{name}.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")


def write_folder(out: Path, manifest: Manifest, records: dict[str, list[TaskRecord]]) -> None:
    """Write every file into a staging sibling, then swap it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_path(out)
    staging.mkdir()
    try:
        for name, split_records in records.items():
            write_split(staging, name, split_records)
        (staging / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        swap_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_manifest(folder: Path) -> Manifest:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise TradeError(f"{folder} is not a tasks folder (no {MANIFEST})", hint="build one with `trade data tasks`")
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise TradeError(f"{path} is not a tasks manifest ({error_line(error)})", hint=REBUILD) from None


def read_records(folder: Path, split: str) -> list[TaskRecord]:
    """The records of one split; a line that is not one is an error naming the file and line."""
    path = Path(folder) / f"{split}.jsonl"
    if not path.is_file():
        raise TradeError(f"{path} is missing", hint=REBUILD)
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                records.append(TaskRecord.model_validate_json(line))
            except ValidationError as error:
                raise TradeError(f"{path}:{number}: not a task record ({error_line(error)})", hint=REBUILD) from None
    return records
