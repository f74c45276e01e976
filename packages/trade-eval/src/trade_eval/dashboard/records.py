"""The lines of a run's JSONL files as JSON objects, parsed once each as the file grows; a line that is not
a JSON object is kept as a problem at its place, so one bad line costs its day only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trade_eval.dashboard.lines import LineIndex


@dataclass(frozen=True)
class Line:
    number: int
    """0-based among the file's complete non-blank lines (the address of a day or an episode)."""
    value: dict[str, Any] | None
    problem: str = ""


class JsonLines:
    """A JSONL file's complete lines, parsed incrementally."""

    def __init__(self, path: Path, *, keyed: bool = False) -> None:
        self.index = LineIndex(path, keyed=keyed)
        self.lines: list[Line] = []
        self.generation = 0

    def refresh(self) -> list[Line]:
        self.index.refresh()
        if self.generation != self.index.generation:
            self.lines, self.generation = [], self.index.generation
        start = len(self.lines)
        for number, raw in enumerate(self.index.read_from(start), start=start):
            self.lines.append(parse(self.index.path.name, number, raw))
        return self.lines

    @property
    def partial(self) -> bool:
        return self.index.partial


def parse(name: str, number: int, raw: bytes) -> Line:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as error:
        return Line(number, None, f"{name} line {number + 1}: not JSON ({error.__class__.__name__})")
    if not isinstance(value, dict):
        return Line(number, None, f"{name} line {number + 1}: not a JSON object")
    return Line(number, value)
