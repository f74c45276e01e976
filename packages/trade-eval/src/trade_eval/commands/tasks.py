"""``trade eval tasks``: every task of a split as an independent episode, many in flight, scored as in training."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trade_core.errors import TradeError
from trade_eval.commands import runs

if TYPE_CHECKING:
    from trade_eval.settings import RunSettings


@click.command("tasks", short_help="Evaluate every task of a split as an independent episode, scored as in training.")
@runs.run_options
@click.option(
    "--tasks",
    "tasks_path",
    required=True,
    type=click.Path(path_type=Path),
    help="A `trade data tasks` folder (with --split) or one of its .jsonl files.",
)
@click.option("--split", help="The folder's split to evaluate (e.g. test).")
@click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    help="OpenAI-compatible server (repeatable: each episode goes to the least busy one).",
)
@click.option("--samples", default=1, show_default=True, type=click.IntRange(min=1), help="Episodes per task.")
@click.option(
    "--concurrency", default=64, show_default=True, type=click.IntRange(min=1), help="Episodes in flight at once."
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Processes playing the episodes, each with its own event loop and a share of --concurrency (one loop's "
    "harness is a core's worth): for served policies and baselines, not --policy local.",
)
@click.option(
    "--scheme",
    "schemes",
    multiple=True,
    default=("bucketed",),
    show_default=True,
    help="Reward scheme (repeatable, `trade reward list`); the first fills Trajectory.reward.",
)
@click.option("--data", type=click.Path(path_type=Path), help="Dataset folder [the tasks manifest's dataset].")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N tasks.")
@click.option("--out", type=click.Path(path_type=Path), help="Run folder [runs/tasks-<model>-<split>-x<N>-seed<S>].")
@click.option("--resume", is_flag=True, help="Skip the (task, sample) pairs --out already holds (same flags).")
def tasks_command(
    policy_name: str,
    settings: RunSettings,
    tasks_path: Path,
    split: str | None,
    base_urls: tuple[str, ...],
    samples: int,
    concurrency: int,
    workers: int,
    schemes: tuple[str, ...],
    data: Path | None,
    limit: int | None,
    out: Path | None,
    resume: bool,
    model_cutoff: str | None,
    anonymize: bool,
    anonymize_noise: float | None,
) -> None:
    """Play every task of --tasks (each --samples times) as a fresh episode on the training Episode, with the
    task's own prompt, and score it with the task's ground truth through the reward schemes training uses.

    Episodes are independent: --concurrency of them are in flight at once, spread over the --base-url
    servers. An episode the server cannot answer (after retries) is recorded as failed with its reason;
    the run goes on. Each finished episode is appended to --out (trajectories.jsonl, episodes.jsonl);
    --resume skips those. The end prints (and writes to summary.json) the mean reward per scheme, the stop
    and tool-error rates, each with a 95% bootstrap interval over tasks (a task's samples drawn together),
    the failure reasons, turns and tokens per episode.

    \b
    trade eval tasks --tasks tasks --split test --base-url http://127.0.0.1:8001/v1 --model trader_agent
    trade eval tasks --tasks tasks/test.jsonl --policy momentum --limit 100
    """
    from trade_data.store import MarketStore
    from trade_eval.policy import POLICIES
    from trade_eval.single_day import TasksEval, check_workers, load_tasks, new_manifest, run_tasks, summary_lines
    from trade_reward.schemes import get_scheme

    check_workers(POLICIES.get(policy_name), workers)  # before a model is loaded
    policy = runs.checked_policy(policy_name, settings, base_urls)
    chosen = [get_scheme(name) for name in dict.fromkeys(schemes)]
    records, split_name, dataset = load_tasks(tasks_path, split)
    data = data or dataset
    if data is None:
        raise TradeError(f"{tasks_path} has no tasks manifest naming its dataset", hint="pass --data DIR")
    store = MarketStore.load(data)
    settings = policy.for_data(settings, store)
    evaluation = TasksEval(
        store, records[:limit], chosen, samples, anonymize=anonymize, anonymize_noise=anonymize_noise
    )
    servers = list(base_urls) if policy.needs_server else []
    runs.check_servers(policy, settings, servers)
    manifest = new_manifest(
        evaluation,
        policy_name,
        settings,
        command=["trade", *sys.argv[1:]],
        tasks=tasks_path,
        split=split_name,
        servers=servers,
        data=data,
        policy_dist=runs.policy_dist(policy_name),
    )
    runs.run_manifest(manifest, model_cutoff, min(record.task.date for record in evaluation.records))
    who = runs.run_label(policy_name, settings.model, evaluation.anonymized)
    out = out or Path("runs") / f"tasks-{who}-{split_name}-x{samples}-seed{settings.seed}"
    summary = run_tasks(
        evaluation,
        policy,
        settings,
        out,
        manifest,
        servers=servers,
        concurrency=concurrency,
        workers=workers,
        resume=resume,
    )
    click.echo(f"\n{out}: {len(evaluation.records)} tasks of {split_name} x {samples} sample(s), policy {policy_name}")
    click.echo("\n".join(summary_lines(summary)))
    runs.refuse_nothing_played(summary.failed, summary.episodes, "episodes", out)
