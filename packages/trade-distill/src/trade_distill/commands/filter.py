"""``trade distill filter``: keep the trajectories that pass every rule, and say what each rule removed."""

from __future__ import annotations

from pathlib import Path

import click

from trade_core.params import settings_from


@click.command("filter")
@click.argument("sources", metavar="RUN_DIR_OR_FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("data/synth_filtered.jsonl"),
    show_default=True,
    help="The kept trajectories, one JSON per line, in input order.",
)
@click.option(
    "--rule",
    "rules",
    multiple=True,
    metavar="NAME",
    help="A filter to apply, in the order given (repeatable). Default: the built-in rules.",
)
@click.option(
    "--set", "pairs", multiple=True, metavar="RULE.KEY=VALUE", help="A rule's option, e.g. nav-return.threshold=0.01."
)
@click.option("--dry-run", is_flag=True, help="Only count: write nothing.")
def filter_command(
    sources: tuple[Path, ...], out: Path, rules: tuple[str, ...], pairs: tuple[str, ...], dry_run: bool
) -> None:
    """Keep the good trajectories of RUN_DIR_OR_FILE... (trade eval runs, verl rollouts, trajectory files)."""
    from trade_distill.builtin import BUILTIN_FILTERS
    from trade_distill.filters import FILTERS, apply, configure
    from trade_distill.inputs import read_sources
    from trade_tools.trajectory import write_trajectories

    chosen = [FILTERS.get(name) for name in rules] or [FILTERS.get(item.name) for item in BUILTIN_FILTERS]
    options = configure(chosen, settings_from(pairs, example="nav-return.threshold=0.01"))
    inputs = read_sources(sources)
    kept, removed = apply(inputs.trajectories, chosen, options)
    width = max(len(rule.name) for rule in chosen)
    inputs.report()
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
