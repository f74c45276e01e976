"""The one trajectory format: the final Episode, the conversation and the reward breakdown, as JSONL.

The backtest writes it, verl training writes it each step (``trade train``), and the dashboard, reward inspection and
distillation read only it. ``version`` changes whenever a field changes meaning.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from trade_core.errors import TradeError
from trade_tools.episode import Episode

TRAJECTORY_VERSION = 1


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

    version: Literal[1] = TRAJECTORY_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task_id: str
    source: str = Field(description="what produced it: play, backtest, verl, ...")
    model: str = ""
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    episode: Episode
    messages: list[Message]
    reward: dict[str, Any] | None = Field(None, description="the reward breakdown, when scored")


def write_trajectories(path: Path, trajectories: Iterable[Trajectory]) -> Path:
    """Write a whole JSONL file atomically (temporary file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with open(staging, "w", encoding="utf-8") as handle:
            for trajectory in trajectories:
                handle.write(trajectory.model_dump_json() + "\n")
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)
    return path


def read_trajectories(path: Path) -> Iterator[Trajectory]:
    """Read a JSONL file; a malformed line is an error naming the file and line number."""
    path = Path(path)
    if not path.is_file():
        raise TradeError(f"{path}: no such trajectory file")
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield Trajectory.model_validate_json(line)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise TradeError(f"{path}:{number}: not a trajectory ({where}: {first['msg']})") from None
