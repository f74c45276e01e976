"""``trade distill filter``: keep the trajectories that pass every rule, and say what each rule removed."""

from __future__ import annotations

from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_core.params import settings_from
from trade_distill.builtin import BUILTIN_FILTERS
from trade_distill.filters import FILTERS, apply, configure
from trade_tools.trajectory import Trajectory, read_trajectories, write_trajectories

FOLDER_LAYOUTS = ("trajectories.jsonl", "trajectories/*.jsonl", "rollouts/trajectories/*.jsonl")
"""Where a run folder keeps trajectories: trade eval (backtest, tasks); verl's rollout folder or training run."""


def trajectory_files(source: Path) -> list[Path]:
    """The trajectory files of a file or run folder; a training run's steps in step order."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise TradeError(f"{source}: no such file or folder")
    for layout in FOLDER_LAYOUTS:
        found = sorted(source.glob(layout), key=lambda path: (len(path.stem), path.stem))
        if found:
            return found
    raise TradeError(f"{source}: no trajectories found", hint=f"looked for {', '.join(FOLDER_LAYOUTS)}")


@click.command("filter")
@click.argument("sources", metavar="RUN_DIR_OR_FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=Path("data/synth_filtered.jsonl"), show_default=True,
              help="The kept trajectories, one JSON per line, in input order.")  # fmt: skip
@click.option("--rule", "rules", multiple=True, metavar="NAME",
              help="A filter to apply, in the order given (repeatable). Default: the built-in rules.")  # fmt: skip
@click.option(
    "--set", "pairs", multiple=True, metavar="RULE.KEY=VALUE", help="A rule's option, e.g. nav-return.threshold=0.01."
)
@click.option("--dry-run", is_flag=True, help="Only count: write nothing.")
def filter_command(
    sources: tuple[Path, ...], out: Path, rules: tuple[str, ...], pairs: tuple[str, ...], dry_run: bool
) -> None:
    """Keep the good trajectories of RUN_DIR_OR_FILE... (trade eval runs, verl rollouts, trajectory files)."""
    chosen = [FILTERS.get(name) for name in rules] or [FILTERS.get(item.name) for item in BUILTIN_FILTERS]
    options = configure(chosen, settings_from(pairs, example="nav-return.threshold=0.01"))
    trajectories: list[Trajectory] = [
        t for source in sources for path in trajectory_files(source) for t in read_trajectories(path)
    ]
    kept, removed = apply(trajectories, chosen, options)
    width = max(len(rule.name) for rule in chosen)
    click.echo(f"read {len(trajectories)} trajectories from {len(sources)} input(s)")
    for rule, rule_options, result in zip(chosen, options, removed, strict=True):
        why = ", ".join(f"{count} {reason}" for reason, count in result.reasons.most_common())
        settings = " ".join(f"{key}={value}" for key, value in rule_options.items())
        click.echo(
            f"  {rule.name:<{width}}  removed {result.count}"
            + (f" ({why})" if why else "")
            + (f" [{settings}]" if settings else "")
        )
    if dry_run:
        click.echo(f"kept {len(kept)} (dry run: nothing written)")
        return
    write_trajectories(out, kept)
    click.echo(f"kept {len(kept)} -> {out}")
