"""``trade train``: plan, check and launch a training run; ``trade train export`` a checkpoint."""

from __future__ import annotations

from pathlib import Path

import click

from trade_core.errors import TradeError
from trade_core.plugins import get_manager
from trade_core.runs import running


class TrainGroup(click.Group):
    """A group that runs training itself when no subcommand is given; ``-- ARGS`` are Hydra overrides."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["trade.overrides"] = tuple(args[cut + 1 :])
            args = args[:cut]
        return super().parse_args(ctx, args)


@click.group("train", cls=TrainGroup, invoke_without_command=True, subcommand_metavar="[export] | [-- OVERRIDES]")
@click.option("--trainer", "trainer_name", default="verl-grpo", show_default=True, help="Trainer plugin to use.")
@click.option("--model", help="Model folder (HF format) to train, or a hub id ORG/NAME, e.g. /models/Qwen3-4B.")
@click.option("--tasks", type=click.Path(path_type=Path), help="Folder from `trade data tasks`.")
@click.option(
    "--dataset",
    type=click.Path(path_type=Path),
    help="Rows file for a trainer that reads one, not tasks (swift-lora: trade distill export).",
)
@click.option("--data", type=click.Path(path_type=Path), help="Dataset for the tools (default: the tasks' dataset).")
@click.option(
    "--device",
    type=click.Choice(["npu", "gpu", "cpu"]),
    default="npu",
    show_default=True,
    help="cpu: the trl-grpo and swift-lora trainers.",
)
@click.option("--nodes", default=1, type=click.IntRange(min=1), show_default=True, help="Ray nodes.")
@click.option(
    "--gpus-per-node",
    default=8,
    type=click.IntRange(min=1),
    show_default=True,
    help="Cards per node (Atlas A3: 16 dies).",
)
@click.option("--reward", default="bucketed", show_default=True, help="Reward scheme (`trade reward list`).")
@click.option("--run-dir", type=click.Path(path_type=Path), help="Run folder (default runs/<timestamp>).")
@click.option(
    "--logger",
    "loggers",
    multiple=True,
    default=("console",),
    show_default=True,
    help="verl trainer.logger entries, repeatable (console, swanlab, tensorboard, wandb).",
)
@click.option("--tool-format", help="verl multi_turn.format (default: hermes for Qwen3, qwen3_coder for Qwen3.5).")
@click.option("--dry-run", is_flag=True, help="Write the run folder, print the command, validate with verl; no launch.")
@click.pass_context
def train_group(
    ctx: click.Context,
    trainer_name: str,
    model: str | None,
    tasks: Path | None,
    dataset: Path | None,
    data: Path | None,
    device: str,
    nodes: int,
    gpus_per_node: int,
    reward: str,
    run_dir: Path | None,
    loggers: tuple[str, ...],
    tool_format: str | None,
    dry_run: bool,
) -> None:
    """Train the trading agent; everything after `--` goes to the trainer (Hydra overrides for verl-grpo, KEY=VALUE
    settings for trl-grpo, `swift sft` flags for swift-lora).

    \b
    trade train --model Qwen3-4B --tasks tasks --device npu --dry-run
    trade train --model Qwen3-4B --tasks tasks --device gpu --gpus-per-node 8 -- trainer.total_epochs=2
    """
    if ctx.invoked_subcommand is not None:
        return
    import datetime as dt
    import shlex

    from trade_train.trainer import TRAINERS, TrainSpec

    if not model:
        raise TradeError("--model is required", hint="a model folder (HF format) or a hub id ORG/NAME")
    if tasks and dataset:
        raise TradeError("--tasks and --dataset are two kinds of training data", hint="pass the one your trainer reads")
    spec = TrainSpec(  # the trainer's preflight says which of tasks and dataset it needs
        model=model,
        tasks=tasks,
        dataset=dataset,
        data=data,
        device=device,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        reward=reward,
        run_dir=run_dir or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S"),
        logger=loggers,
        tool_format=tool_format,
        overrides=ctx.meta.get("trade.overrides", ()),
    )
    trainer = TRAINERS.get(trainer_name)
    problems = trainer.preflight(spec, launch=not dry_run)  # all of them, before anything is written or started
    if problems:
        for problem in problems:
            click.echo(f"error: {problem.one_line()}", err=True)
        ctx.exit(2)
    plan = trainer.plan(spec)
    plan.write()
    click.echo(f"run folder {plan.run_dir}: {', '.join(sorted([*plan.files, 'command.sh', 'env.json']))}")
    click.echo(" ".join([*(f"{k}={shlex.quote(v)}" for k, v in sorted(plan.env.items())), shlex.join(plan.command)]))
    summary = trainer.check(plan)  # a wrong override fails here in one line, not after Ray has started
    if dry_run:
        click.echo(summary)
        click.echo("dry run: config valid; nothing launched")
        return
    click.echo("config valid; launching")
    with running("training", plan.run_dir, get_manager()):  # the launched process and its workers inherit the run
        code = plan.launch()
        if code != 0:
            ctx.exit(code)  # a failed run has not finished: no trade_run_finished


@train_group.command("export")
@click.argument("checkpoint", type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="HF model folder to write (for vLLM).")
@click.option("--backend", default="fsdp", show_default=True, help="Checkpoint backend (fsdp or megatron).")
def export_command(checkpoint: Path, out: Path, backend: str) -> None:
    """Merge a verl CHECKPOINT (a run's checkpoints/ or one global_step_N) into a HF folder for vLLM."""
    from trade_train.verl_grpo.export import export_checkpoint

    click.echo(f"merged {export_checkpoint(checkpoint, out, backend)} -> {out}")
