"""Every `trade ...` line in the READMEs' bash blocks names commands and options that exist.

Lines that need a server, a model or files are not run here (the packages' README tests run the runnable ones);
this parses each line with the real CLI of the installed plugins, so a renamed flag or command fails.
"""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import click
import pytest

from trade_core.cli import build_cli
from trade_core.plugins import get_manager

REPO = Path(__file__).resolve().parents[3]
READMES = [REPO / "README.md", *sorted(REPO.glob("packages/*/README.md"))]


def readme_commands() -> list[tuple[str, list[str]]]:
    found = []
    for readme in READMES:
        for block in re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.DOTALL):
            for line in block.replace("\\\n", " ").splitlines():
                for command in re.split(r"&&|;|\|", line):
                    words = shlex.split(command, comments=True)
                    if words[:1] == ["trade"]:
                        found.append((f"{readme.relative_to(REPO)}: {shlex.join(words)}", words[1:]))
    return found


def parse(cli: click.Group, args: list[str]) -> None:
    """Resolve ``args`` down to a command and parse its options as click would (nothing runs). Values that
    depend on the reader's files (a path that must exist, a required option left out) are not this test's."""
    ctx = cli.make_context("trade", list(args), resilient_parsing=True)
    command: click.Command = cli
    rest = _unparsed(ctx)
    while isinstance(command, click.Group) and rest:
        name, found, rest = command.resolve_command(ctx, rest)
        assert found is not None and name is not None
        command = found
        try:
            ctx = command.make_context(name, list(rest), parent=ctx)
        except click.BadParameter:
            return
        rest = _unparsed(ctx) if isinstance(command, click.Group) else []


def _unparsed(ctx: click.Context) -> list[str]:
    """A group's subcommand and its arguments (click 8 keeps the subcommand's name apart)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return [*ctx.protected_args, *ctx.args]


COMMANDS = readme_commands()


def test_the_readmes_show_commands() -> None:
    assert len(COMMANDS) > 40


@pytest.mark.parametrize(("where", "args"), COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_readme_command_parses(where: str, args: list[str]) -> None:
    cli = build_cli(get_manager())
    if args[0] not in cli.commands:
        pytest.skip(f"the plugin of `trade {args[0]}` is not installed here")
    parse(cli, args)
