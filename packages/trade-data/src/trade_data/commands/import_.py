"""``trade data import``: a long daily-bar table -> a Qlib provider dir."""

from __future__ import annotations

from pathlib import Path

import click

from trade_core.errors import TradeError


def _parse_universes(values: tuple[str, ...]) -> dict[str, Path]:
    universes = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise TradeError(f"--universe {value!r} is not NAME=FILE", hint="e.g. --universe csi300=csi300.txt")
        universes[name] = Path(path)
    return universes


@click.command("import", short_help="Import a daily-bar table (parquet or CSV) as a Qlib dataset.")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Dataset folder to create or update.")
@click.option("--calendar", "calendar_file", type=click.Path(path_type=Path), help="Trading days, one per line.")
@click.option("--universe", "universes", multiple=True, metavar="NAME=FILE", help="Membership intervals (repeatable).")
@click.option("--allow-revisions", is_flag=True, help="Replace rows OUT holds that the table gives other values.")
@click.option("--allow-drop", is_flag=True, help="Accept losing universe member-days or unreadable symbols of OUT.")
def import_command(
    source: Path,
    out: Path,
    calendar_file: Path | None,
    universes: tuple[str, ...],
    allow_revisions: bool,
    allow_drop: bool,
) -> None:
    """Import SOURCE (parquet or CSV: date,symbol,open,high,low,close,volume,factor).

    Prices are raw CNY with a backward adjustment factor; the dataset stores Qlib's cn
    convention (price x factor, volume / factor). Everything is validated first; the
    dataset is replaced atomically. An existing one gains the table's new symbols, dates and
    rows and keeps the rest byte for byte; changing a stored row or losing universe
    members is refused unless --allow-revisions / --allow-drop says so.
    """
    from trade_data.bar_tables import precompute
    from trade_data.importer import import_table
    from trade_data.info import dataset_info

    import_table(
        source,
        out,
        calendar_file=calendar_file,
        universe_files=_parse_universes(universes),
        allow_revisions=allow_revisions,
        allow_drop=allow_drop,
        progress=True,
    )
    precompute(out)
    click.echo(dataset_info(out).to_text())
