"""``trade quickstart``: the whole loop on one machine, CPU only, resumable stage by stage."""

from __future__ import annotations

from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_train.install import install_hint

STAGE_NAMES = ("market", "tasks", "model", "grpo", "evaluate", "backtest", "report")


@click.command("quickstart", short_help="The whole loop on one laptop: market, tasks, tiny model, GRPO, eval, report.")
@click.option("--data", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A dataset folder (`trade data import`) [the embedded synthetic market].")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("quickstart"),
              show_default=True, help="Run folder; a rerun into it resumes after the last finished stage.")  # fmt: skip
@click.option("--steps", default=6, show_default=True, type=click.IntRange(min=1), help="GRPO steps.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the market, tasks, weights and sampling: the same seed, the same numbers.")  # fmt: skip
@click.option("--days", default=6, show_default=True, type=click.IntRange(min=2),
              help="Held-out test days evaluated and backtested.")  # fmt: skip
@click.option("--sft-steps", default=300, show_default=True, type=click.IntRange(min=1),
              help="Fine-tuning steps that teach the tool-call format before GRPO.")  # fmt: skip
@click.option("--stop-after", type=click.Choice(STAGE_NAMES), help="Stop after this stage (rerun to go on).")
def quickstart_command(data: Path | None, out: Path, steps: int, seed: int, days: int, sft_steps: int,
                       stop_after: str | None) -> None:  # fmt: skip
    """Run the loop end to end without a GPU: build the market and embargoed tasks, teach the tiny Qwen3 the
    tool-call format on a baseline policy's episodes, train it with GRPO (trl-grpo), evaluate it before and
    after on held-out days beside the baselines, backtest it, and write OUT/report.md and OUT/report.html.

    Each stage prints its time; OUT/quickstart.json records the finished ones, so an interrupted run picks up
    where it stopped (with the same flags).

    \b
    trade quickstart
    trade quickstart --out quickstart-seed1 --seed 1
    """
    try:  # what the extra brings, imported as the stages will import it
        import transformers  # noqa: F401
        import trl  # noqa: F401

        import trade_eval.policies.local  # noqa: F401
    except ImportError as error:
        needs = error.name or "trade-train[quickstart]"
        raise TradeError(f"trade quickstart needs {needs}", hint=install_hint("quickstart")) from None
    from trade_train.quickstart.pipeline import STAGES
    from trade_train.quickstart.settings import QuickstartSettings
    from trade_train.quickstart.stages import run_stages

    settings = QuickstartSettings(data=data.resolve() if data else None, steps=steps, seed=seed, days=days,
                                  sft_steps=sft_steps)  # fmt: skip
    state = run_stages(out, settings, STAGES, stop_after=stop_after)
    total = sum(f.seconds for f in state.finished.values())
    if "report" not in state.finished:
        click.echo(f"stopped after {stop_after} ({total:.0f} s so far); rerun the same command to go on")
        return
    result = state.finished["report"].result
    click.echo(f"\nreport: {result['report']} and {result['page']} ({total:.0f} s in all)")
    click.echo("next: the same loop on real data, then the real model on NPUs (see the report's last section):")
    click.echo(f"  trade quickstart --data Q --out {out}-real")
    click.echo("  trade train --model /models/Qwen3-4B --tasks tasks --device npu --run-dir runs/qwen3-4b --dry-run")
