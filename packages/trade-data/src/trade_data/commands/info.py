"""``trade data info``: a dataset at a glance."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("info", short_help="Show what a dataset holds and whether it is synthetic.")
@click.argument("dataset", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info_command(dataset: Path, as_json: bool) -> None:
    """Show DATASET's symbols, date range, universes, suspensions and whether it is synthetic."""
    from trade_data.info import dataset_info

    info = dataset_info(dataset)
    click.echo(info.model_dump_json(indent=2) if as_json else info.to_text())
