"""What every trainer reads, checked before a run writes or starts anything: each problem one line with its fix.

A run found broken after Ray, the model and vLLM have started has cost minutes; these checks cost milliseconds,
and return every problem at once so one round of fixes is enough.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from trade_core.errors import TradeError
from trade_data.qlib_dir import is_dataset
from trade_reward.taskfolder import Manifest, read_manifest
from trade_train.trainer import TrainSpec

SPLITS = ("train", "val")
"""The tasks folder's splits a run trains and validates on (verl validates on val); a trainer that validates on
nothing asks for train alone."""
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""``ORG/NAME``: a model verl and vLLM fetch from the hub, so it need not exist here."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
"""Any one of these holds a tokenizer's vocabulary (fast, SentencePiece, BPE, WordPiece)."""
MODEL_FOLDER = f"a Hugging Face model folder holds config.json and one of {', '.join(TOKENIZER_FILES)}"


def model_problems(model: str) -> list[TradeError]:
    """A local model folder must hold a config and a tokenizer; a hub id is fetched on the training machine."""
    path = Path(model)
    if not path.is_dir():
        if HUB_ID.fullmatch(model):
            return []
        return [
            TradeError(
                f"model folder {model} does not exist", hint="pass a Hugging Face model folder or a hub id ORG/NAME"
            )
        ]
    lacks = []
    if not (path / "config.json").is_file():
        lacks.append("config.json")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        lacks.append("tokenizer")
    return [TradeError(f"model folder {model} has no {' and no '.join(lacks)}", hint=MODEL_FOLDER)] if lacks else []


def dataset_path(spec: TrainSpec, manifest: Manifest) -> Path:
    """The dataset the tools read: ``--data``, else the one the tasks were built from."""
    return spec.data.resolve() if spec.data else manifest.dataset_in(spec.tasks)


def tasks_problems(spec: TrainSpec, splits: tuple[str, ...] = SPLITS) -> list[TradeError]:
    """The tasks folder holds a manifest and every split the trainer reads; the dataset its tools read is there."""
    if spec.tasks is None:
        return [TradeError("--tasks is required", hint="a folder from `trade data tasks`")]
    try:
        manifest = read_manifest(spec.tasks)
    except TradeError as error:
        return [error]
    problems = [
        TradeError(
            f"tasks folder {spec.tasks} has no {split}.jsonl",
            hint="rebuild it with `trade data tasks`: its default --split makes train, val and test",
        )
        for split in splits
        if not (spec.tasks / f"{split}.jsonl").is_file()
    ]
    data = dataset_path(spec, manifest)
    if not is_dataset(data):
        problems.append(
            TradeError(f"no dataset at {data}", hint="pass --data DIR: the dataset the tasks were built from")
        )
    return problems


def run_dir_problems(run_dir: Path) -> list[TradeError]:
    """The run folder, or the nearest folder above it that exists, takes a file (removed at once)."""
    here = existing = run_dir.absolute()
    try:
        existing = next(path for path in (here, *here.parents) if path.exists())
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as error:
        reason = f"{error.strerror or error}: {existing}"
        return [TradeError(f"run folder {run_dir} is not writable: {reason}", hint="choose another --run-dir")]
    return []


def spec_problems(spec: TrainSpec, splits: tuple[str, ...] = SPLITS) -> list[TradeError]:
    """Every problem with the model, the tasks (``splits`` of them) and the run folder, in that order."""
    return [*model_problems(spec.model), *tasks_problems(spec, splits), *run_dir_problems(spec.run_dir)]
