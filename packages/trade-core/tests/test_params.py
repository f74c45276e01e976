"""Click helpers every package's commands share."""

from __future__ import annotations

import dataclasses

import click
from click.testing import CliRunner

from trade_core.params import grouped


@dataclasses.dataclass(frozen=True)
class Window:
    start: str
    days: int


@dataclasses.dataclass(frozen=True)
class Output:
    out: str | None
    resume: bool


def test_grouped_options_reach_the_command_as_typed_groups_and_the_rest_as_they_are() -> None:
    seen = []

    @click.command()
    @click.option("--start")
    @click.option("--days", type=int, default=5)
    @click.option("--out")
    @click.option("--resume", is_flag=True)
    @click.option("--policy", default="hold")
    @grouped(window=Window, output=f"{__name__}:Output")
    def command(policy: str, window: Window, output: Output) -> None:
        """Play a window."""
        seen.append((policy, window, output))

    result = CliRunner().invoke(command, ["--start", "2025-06-20", "--out", "runs/a", "--policy", "random"])
    assert result.exit_code == 0, result.output
    assert seen == [("random", Window("2025-06-20", 5), Output("runs/a", False))]
    assert "Play a window." in CliRunner().invoke(command, ["--help"]).output
