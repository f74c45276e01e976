"""``trade data download``: fetch real market data from a registered source into a dataset folder."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from trade_core.params import ISO_DATE


class _SourcesHelp(click.Command):
    """Lists the registered sources under ``--help``: they come from plugins, so the list is built at run time."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from trade_data.sources import DATA_SOURCES

        with formatter.section("Sources"):
            for _, source in sorted(DATA_SOURCES.all().items()):
                formatter.write_text(f"{source.name}: {source.description}")
                with formatter.indentation():
                    formatter.write(f"{'':{formatter.current_indent}}from {source.origin}\n")  # unwrapped: copyable
                    if source.options:
                        formatter.write_text("options: " + ", ".join(f"--{k} ({v})" for k, v in source.options.items()))


@click.command("download", cls=_SourcesHelp, short_help="Download real data (Qlib cn, community tarball, baostock).")
@click.option("--source", "source_name", required=True, metavar="NAME", help="Data source (listed below).")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Dataset folder to create or replace.")
@click.option(
    "--from-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Convert this already-downloaded file instead of fetching (for offline machines).",
)
@click.option("--start", type=ISO_DATE, help="First date to fetch (sources that take it: baostock).")
@click.option("--end", type=ISO_DATE, help="Last date to fetch (sources that take it: baostock).")
@click.option(
    "--keep-download",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Keep the fetched file in this folder (to copy it to an offline machine) instead of deleting it.",
)
def download_command(
    source_name: str,
    out: Path,
    from_file: Path | None,
    start: dt.date | None,
    end: dt.date | None,
    keep_download: Path | None,
) -> None:
    """Download real market data from source NAME into the dataset folder OUT.

    Training machines are usually OFFLINE: there the network step fails with a one-line
    error. Fetch the file on a machine with internet access instead (the URL is listed
    below; or run this command there with --keep-download DIR), copy it over, and convert
    it offline with --from-file FILE. OUT is replaced atomically: a failure leaves an
    existing dataset untouched.
    """
    from trade_data.bar_tables import precompute
    from trade_data.info import dataset_info
    from trade_data.sources import download

    dates = {"start": start, "end": end}
    options = {name: day.isoformat() for name, day in dates.items() if day is not None}
    download(source_name, out, from_file=from_file, options=options, keep_download=keep_download)
    precompute(out)
    click.echo(dataset_info(out).to_text())
