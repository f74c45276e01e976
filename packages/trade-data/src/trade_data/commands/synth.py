"""``trade data synth``: a seeded synthetic A-share market -> a Qlib provider dir marked SYNTHETIC."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from trade_core.params import ISO_DATE


@click.command("synth", short_help="Write a seeded synthetic A-share market (marked synthetic).")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="Dataset folder to create (an existing synthetic one is replaced).",
)
@click.option("--symbols", default=300, show_default=True, help="Number of stocks (10..6000).")
@click.option("--start", default="2018-01-01", type=ISO_DATE, show_default=True, help="First date.")
@click.option("--end", default="2025-12-31", type=ISO_DATE, show_default=True, help="Last date.")
@click.option("--seed", default=0, show_default=True, help="Random seed; the same seed gives the same market.")
@click.option(
    "--signal",
    metavar="NAME:IC",
    help="Plant an edge: the next day's stock-specific moves follow the cross-sectional rank of the Alpha158 "
    "K-line factor NAME (KMID, KLEN, KMID2, KUP, KLOW, KSFT, KSFT2) with rank IC about IC, e.g. KMID:0.2. "
    "Recorded in trade.json and shown by `trade data info` and reports; never in a prompt.",
)
def synth_command(out: Path, symbols: int, start: dt.date, end: dt.date, seed: int, signal: str | None) -> None:
    """Write a synthetic market: stocks on all boards, SH000001/SH000300/SH000905, csi300/csi500.

    For testing and development without real data: fat-tailed, volatility-clustered returns with
    market and sector factors, price limits, suspensions, ex-dividend factors and IPOs. The
    dataset is marked synthetic in trade.json and `trade data info` says so. Markets over 10M
    symbol-days (up to 40M: the whole A-share market over 20 years is ~27M) are simulated and
    written in blocks of stocks, in bounded memory. Without --signal nothing in it predicts the
    next day's cross-section, so no strategy has an edge to learn.
    """
    from trade_data.bar_tables import precompute
    from trade_data.info import dataset_info
    from trade_data.signals import PlantedSignal
    from trade_data.synth import write_synthetic_market

    planted = None if signal is None else PlantedSignal.parse(signal)
    write_synthetic_market(out, symbols=symbols, start=start, end=end, seed=seed, signal=planted, progress=True)
    precompute(out)
    click.echo(dataset_info(out).to_text())
