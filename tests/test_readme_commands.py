"""Every `trade ...` line in the READMEs' bash blocks names commands and options that exist.

Lines that need a server, a model or files are not run here (the packages' README tests run the runnable ones);
this parses each line with the real CLI of the installed plugins, so a renamed flag or command fails.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import warnings
from pathlib import Path

import click
import pytest

from trade_core.cli import build_cli
from trade_core.plugins import get_manager

REPO = Path(__file__).resolve().parents[1]
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


OUTPUTS = ("out", "save", "run_dir")
"""The options through which a command writes: ``--out``, ``--save``, ``--run-dir``."""


def written(cli: click.Group, args: list[str]) -> list[str]:
    """What a README command writes: its output options' values as given, else their defaults, and the files
    an option's help says go beside it ("nav.png and drawdown.png are written beside it")."""
    ctx, command, words = click.Context(cli), cli, list(args)
    while isinstance(command, click.Group) and words and (found := command.get_command(ctx, words[0])):
        command, words = found, words[1:]
    paths = []
    for param in command.params:
        if param.name not in OUTPUTS or not isinstance(param, click.Option):
            continue
        given = [words[n + 1] for n, word in enumerate(words[:-1]) if word in param.opts]
        value = given[-1] if given else param.default
        if isinstance(value, str | Path) and not str(value).startswith(("/", "$", "~")):
            beside = re.findall(r"\b[\w-]+\.png\b", param.help or "")
            paths += [str(value), *(str(Path(value).with_name(name)) for name in beside)]
    return paths


@pytest.mark.skipif(not (REPO / ".git").exists() or shutil.which("git") is None, reason="needs the git checkout")
def test_what_the_readme_examples_write_is_ignored_by_git() -> None:
    """`git status` after the READMEs' examples listed data/, report.html, nav.png, drawdown.png and quickstart/."""
    cli = build_cli(get_manager())
    paths = sorted({path for _, args in COMMANDS if args[0] in cli.commands for path in written(cli, args)})
    assert {"Q", "runs/trader", "quickstart", "tiny-qwen3", "data/synth_filtered.jsonl"} <= set(paths)
    asked = "".join(f"{path}\n{path}/\n" for path in paths)  # a file, or a folder (a pattern may name folders only)
    command = ["git", "check-ignore", "--no-index", "--stdin"]
    checked = subprocess.run(command, input=asked, cwd=REPO, capture_output=True, text=True, check=False)
    assert checked.stderr == ""
    ignored = {path.rstrip("/") for path in checked.stdout.splitlines()}
    assert [path for path in paths if path not in ignored] == []
