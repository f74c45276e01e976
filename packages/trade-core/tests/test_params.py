"""Click helpers every package's commands share."""

from __future__ import annotations

import dataclasses

import click
from click.testing import CliRunner

from trade_core.params import FiniteRange, grouped


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


def test_a_number_option_refuses_nan_in_one_line_as_it_refuses_a_number_out_of_range() -> None:
    @click.command()
    @click.option("--noise", type=FiniteRange(0, 0.1))
    def command(noise: float) -> None:
        click.echo(repr(noise))

    for text in ("nan", "NaN", "-nan"):
        refused = CliRunner().invoke(command, ["--noise", text])
        assert refused.exit_code == 2 and f"Invalid value for '--noise': {text!r} is not a number" in refused.output
    assert "inf is not in the range" in CliRunner().invoke(command, ["--noise", "inf"]).output
    assert CliRunner().invoke(command, ["--noise", "0.01"]).output == "0.01\n"
