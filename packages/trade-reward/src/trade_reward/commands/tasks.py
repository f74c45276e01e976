"""``trade data tasks``: daily training and evaluation samples from a dataset (a trainer-neutral tasks folder)."""

from __future__ import annotations

from pathlib import Path

import click

from trade_tools.commands.options import ANONYMIZE_NOISE, noise_of

DEFAULT_SPLIT = "train=2018-01-01:2023-12-31,val=2024-01-01:2024-12-31,test=2025-01-01:2025-12-31"


@click.command("tasks", short_help="Build daily tasks (JSONL per split) with time splits and an embargo.")
@click.option("--data", type=click.Path(path_type=Path), help="Dataset folder (trade data import/synth).")
@click.option("--universe", default="csi300", show_default=True, help="Universe the pools are drawn from.")
@click.option("--out", type=click.Path(path_type=Path), help="Folder for train/val/test .jsonl and manifest.json.")
@click.option("--pool-size", default="10-30", show_default=True, help="Pool size, N or MIN-MAX.")
@click.option("--per-day", default=1, show_default=True, help="Samples per trading day.")
@click.option("--seed", default=0, show_default=True, help="Seed; the same seed gives the same tasks.")
@click.option("--split", default=DEFAULT_SPLIT, show_default=True, help="NAME=START:END,... (inclusive dates).")
@click.option("--anonymize", is_flag=True, help="Aliases for symbols and dates in every prompt and tool text.")
@click.option("--tools", metavar="NAME,...", help="The tools every task offers, in order [the default four].")
@click.option("--prompt-set", help="How every task is put into words (`trade tools list` names the sets) [default].")
@click.option("--stats", "stats_dir", type=click.Path(path_type=Path), help="Print statistics of a tasks folder.")
def tasks_command(
    data: Path | None,
    universe: str,
    out: Path | None,
    pool_size: str,
    per_day: int,
    seed: int,
    split: str,
    anonymize: bool,
    anonymize_noise: float | None,
    tools: str | None,
    prompt_set: str | None,
    stats_dir: Path | None,
) -> None:
    """One sample per (T0, draw): a pool of universe members with data at T0, initial holdings in whole
    lots (cost basis at the previous close) and cash, the market summary and the rendered prompts.

    Splits are by time with an embargo: no sample's T+3 forward window reaches past its split's end.
    The forward returns go into each record's ground_truth only, never into a prompt. Trainers turn the
    records into their own format (verl-grpo writes verl's parquet rows into its run folder).
    With --anonymize the model sees per-task aliases for stocks and trading days relative to T0 (the
    memorisation guard), and with --anonymize-noise SD bars perturbed per day; the ground truth keeps the real
    symbols.
    """
    from trade_reward.taskbuilder import build_tasks
    from trade_reward.taskstats import task_stats

    if stats_dir is not None:
        click.echo(task_stats(stats_dir).to_text())
        return
    if data is None or out is None:
        raise click.UsageError("--data and --out are required (or --stats DIR)")
    summary = build_tasks(
        data,
        out,
        universe=universe,
        pool_size=pool_size,
        per_day=per_day,
        seed=seed,
        split=split,
        anonymize=anonymize,
        anonymize_noise=noise_of(anonymize, anonymize_noise),
        tools=None if tools is None else [t.strip() for t in tools.split(",") if t.strip()],
        prompt_set=prompt_set,
        progress=True,
    )
    click.echo(summary.to_text())


tasks_command.params.insert([p.name for p in tasks_command.params].index("anonymize") + 1, ANONYMIZE_NOISE)
