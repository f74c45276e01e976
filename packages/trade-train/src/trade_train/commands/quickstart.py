"""``trade quickstart``: the whole loop on one machine, CPU only, resumable stage by stage."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from trade_core.errors import TradeError
from trade_train.install import install_hint
from trade_train.quickstart.settings import QuickstartSettings

STAGE_NAMES = ("market", "tasks", "model", "grpo", "evaluate", "backtest", "report")


def _setting_options(command: Callable[..., None]) -> Callable[..., None]:
    """One flag per run setting (``QuickstartSettings``), with its default and description."""
    from types import UnionType
    from typing import Literal, Union, get_args, get_origin

    for name, field in reversed(list(QuickstartSettings.model_fields.items())):
        if name == "data":
            continue
        kind = field.annotation
        if get_origin(kind) in (UnionType, Union):  # ``int | None``: the model's recipe decides (its description)
            (kind,) = (arg for arg in get_args(kind) if arg is not type(None))
        kind = click.Choice(get_args(kind)) if get_origin(kind) is Literal else kind
        flag, text = f"--{name.replace('_', '-')}", field.description or name
        command = click.option(
            flag,
            name,
            type=kind,
            default=field.default,
            show_default=field.default is not None,
            help=f"{text[:1].upper()}{text[1:]}.",
        )(command)
    return command


@click.command("quickstart", short_help="The whole loop on one laptop: market, tasks, model, GRPO, eval, report.")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A dataset folder (`trade data import`) [the embedded synthetic market].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("quickstart"),
    show_default=True,
    help="Run folder; a rerun into it resumes after the last finished stage.",
)
@_setting_options
@click.option("--seeds", metavar="S,S,...", help="Run once per seed into OUT/seed-S, then OUT/report.md over them.")
@click.option("--stop-after", type=click.Choice(STAGE_NAMES), help="Stop after this stage (rerun to go on).")
def quickstart_command(data: Path | None, out: Path, seeds: str | None, stop_after: str | None, **flags: Any) -> None:
    """Run the loop end to end without a GPU: build a market with a planted signal and embargoed tasks, teach
    a model (--model: the pretrained SmolLM2-135M by default, the tiny random Qwen3 for smoke runs, or your own
    folder) the tool-call format on demonstrations that act on the signal's ranking at random, train it with GRPO
    (prefix-grpo; trl-grpo for tiny), evaluate it before and after on held-out days beside the baselines and the
    signal's oracle, backtest it, and write OUT/report.md and OUT/report.html.

    Each stage prints its time; OUT/quickstart.json records the finished ones, so an interrupted run picks up
    where it stopped (with the same flags).

    \b
    trade quickstart
    trade quickstart --out quickstart-seed1 --seed 1
    trade quickstart --model tiny --out quickstart-tiny
    trade quickstart --model /models/Qwen3-0.6B --out quickstart-qwen3
    """
    try:  # what the extra brings, imported as the stages will import it
        import gguf  # noqa: F401
        import transformers  # noqa: F401
        import trl  # noqa: F401

        import trade_eval.policies.local  # noqa: F401
    except ImportError as error:
        needs = error.name or "trade-train[quickstart]"
        raise TradeError(f"trade quickstart needs {needs}", hint=install_hint("quickstart")) from None
    from trade_train.quickstart.pipeline import STAGES
    from trade_train.quickstart.stages import run_stages

    if seeds is not None:
        _over_seeds(out, _seed_list(seeds), stop_after, data=data.resolve() if data else None, **flags)
        return
    settings = _settings(data=data.resolve() if data else None, **flags)
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


def _settings(**flags: Any) -> QuickstartSettings:
    """The run's settings; a value they refuse is one line naming its flag, before anything runs."""
    from pydantic import ValidationError

    try:
        return QuickstartSettings(**flags)
    except ValidationError as error:
        first = error.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        if first["loc"]:  # one flag's value; else flags that do not go together, named by the message
            given = flags.get(str(first["loc"][0]))
            given = f"{given:g}" if isinstance(given, float) else given  # as typed: -1, not click's -1.0
            message = f"--{str(first['loc'][0]).replace('_', '-')} {given}: {message}"
        raise TradeError(message, hint="see `trade quickstart --help`") from None


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise TradeError(f"--seeds {text!r} is not a list of seeds", hint="e.g. --seeds 0,1,2") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
        raise TradeError(f"--seeds {text!r}: want distinct seeds >= 0", hint="e.g. --seeds 0,1,2")
    return seeds


def _over_seeds(out: Path, seeds: list[int], stop_after: str | None, **flags: Any) -> None:
    """One run per seed (each resumable in OUT/seed-S), then the report over them."""
    from trade_train.quickstart.pipeline import STAGES
    from trade_train.quickstart.report import write_seeds_report
    from trade_train.quickstart.stages import run_stages

    runs = {}
    for seed in seeds:
        click.echo(f"== seed {seed} ==")
        settings = _settings(**{**flags, "seed": seed})
        state = run_stages(out / f"seed-{seed}", settings, STAGES, stop_after=stop_after)
        if "report" not in state.finished:
            click.echo(f"stopped after {stop_after}; rerun the same command to go on")
            return
        runs[seed] = out / f"seed-{seed}"
    report = write_seeds_report(out, runs, _settings(**flags).reward)
    click.echo(f"\nreport over seeds: {report}")
