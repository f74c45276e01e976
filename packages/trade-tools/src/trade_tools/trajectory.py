"""The one trajectory format: the final Episode, the conversation, the ground truth and the reward, as JSONL.

The backtest writes it, verl training writes it each step (``trade train``), and the dashboard, reward inspection and
distillation read only it. ``version`` changes whenever a field changes meaning; older versions are converted
when read, so files written before a change keep working.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from trade_core.errors import TradeError, error_line
from trade_core.files import atomic_open
from trade_tools.episode import Episode
from trade_tools.grading import GroundTruth, Reward

TRAJECTORY_VERSION = 2
"""2: the ground truth, the reward and the training step are typed fields (1 kept them in an untyped ``reward``)."""


class FunctionCall(BaseModel):
    name: str
    arguments: str = Field(description="the JSON text exactly as the model wrote it")


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """A chat message in OpenAI's shape, with the model's reasoning kept apart from its answer."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class Trajectory(BaseModel):
    """One agent's trading day, complete."""

    version: Literal[2] = TRAJECTORY_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task_id: str
    source: str = Field(description="what produced it: play, backtest, verl, ...")
    model: str = ""
    step: int | None = Field(None, description="the training step that produced it")
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    episode: Episode
    messages: list[Message]
    ground_truth: GroundTruth | None = Field(None, description="the task's forward prices, so it can be rescored")
    reward: Reward | None = Field(None, description="the reward breakdown, when scored")

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return _from_version_1(data) if isinstance(data, dict) and data.get("version") == 1 else data


_V1_NO_BUCKET = -99


def _from_version_1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept verl's flat reward breakdown (``bucket`` -99 and ``failure`` "" for none, an unused
    ``penalty``) with the training ``step`` and the ground truth's JSON text inside ``reward``."""
    data = {**data, "version": 2}
    reward = data.get("reward")
    if isinstance(reward, dict):
        reward = dict(reward)
        data["step"] = reward.pop("step", None)
        truth = reward.pop("ground_truth", None)
        data["ground_truth"] = json.loads(truth) if isinstance(truth, str) else truth
        reward.pop("penalty", None)
        if reward.get("bucket") == _V1_NO_BUCKET:
            reward["bucket"] = None
        reward["failure"] = reward.get("failure") or None
        data["reward"] = reward
    return data


def write_trajectories(path: Path, trajectories: Iterable[Trajectory]) -> Path:
    """Write a whole JSONL file atomically."""
    with atomic_open(path) as handle:
        for trajectory in trajectories:
            handle.write(trajectory.model_dump_json() + "\n")
    return Path(path)


class CutShort(TradeError):
    """A trajectory file's last line is not a whole record and no newline ends it: a writer killed mid-line."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: the last line is cut short ({problem})", hint="a writer killed mid-line left it")
        self.where = where


BOM = b"\xef\xbb\xbf"
"""UTF-8's byte order mark, which some editors put before the first line."""


def read_trajectories(path: Path) -> Iterator[Trajectory]:
    """Read a JSONL file of any version (after a BOM, if it starts with one); a malformed line is an error
    naming the file and line number: a :class:`CutShort` one for a last line without its newline, which
    readers of run folders still being written, or left by a killed run, may skip."""
    path = Path(path)
    if not path.is_file():
        raise TradeError(f"{path}: no such trajectory file")
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            record = line.removeprefix(BOM) if number == 1 else line
            if not record.strip():
                continue
            try:
                yield Trajectory.model_validate_json(record)
            except ValidationError as error:
                if not line.endswith(b"\n"):
                    raise CutShort(f"{path}:{number}", error_line(error)) from None
                raise TradeError(f"{path}:{number}: not a trajectory ({error_line(error)})") from None
