"""The supervised bound of the quickstart's tiny model: fine-tuned on demonstrations that rank the planted signal
and buy its TOP stock every day, how often does it buy the top stock on held-out days? If it cannot learn that
rule from labelled examples, GRPO has no rule within its reach to reinforce (packages/trade-train/README.md).

    python scripts/copy_bound.py --out runs/copy-bound [--anonymize [--alias-draws K]] [--ranking-line full|top|none]
        [--sft-steps 600] [--choice top|uniform] [--samples 4] [--tasks N]

The market, tasks and model are the quickstart's (`trade quickstart --stop-after tasks` into OUT/quickstart);
``--anonymize`` plays the same tasks with per-episode aliases, so no day's answer can be memorised and only a
name copied from the tool's text can be right. ``--ranking-line`` is the experiment's one change to what the
model reads: a line appended to compute_alpha_factor's text, ``full`` (排序（从高到低）：A、B、...: every name at
a fixed distance from the reply) or ``top`` (最高：A). ``--choice uniform`` buys a stock drawn from the ranking,
as the quickstart's own demonstrations do. Prints the fine-tune's time and loss and the held-out summary.
A rerun into OUT keeps its market and tasks and redoes the rest.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

LINES = {
    "full": lambda names: "排序（从高到低）：" + "、".join(names),
    "top": lambda names: "最高：" + names[0],
}


def with_ranking_line(kind: str) -> None:
    """Append the ``kind`` line to every compute_alpha_factor text of this process (the experiment's variant)."""
    from trade_tools.builtins.alpha_factor import ComputeAlphaFactor

    run, line = ComputeAlphaFactor.run, LINES[kind]

    def ranked_then_line(self, episode, args):  # type: ignore[no-untyped-def]
        text = run(self, episode, args)
        names = [row.split(". ", 1)[1].rsplit(": ", 1)[0] for row in text.splitlines() if row[:1].isdigit()]
        return f"{text}\n{line(names)}" if names else text

    ComputeAlphaFactor.run = ranked_then_line  # type: ignore[method-assign]


def redrawn(records: list, draws: int, store: object) -> list:  # type: ignore[type-arg]
    """Each anonymized record under ``draws`` alias draws: its task id suffixed ``~k`` (aliases are seeded by the
    task id) and its prompt rendered again with the new aliases; the day, pool and market are the record's."""
    from trade_tools.episode import Episode

    again = []
    for record in records:
        for k in range(draws):
            task = record.task if k == 0 else record.task.model_copy(update={"task_id": f"{record.task.task_id}~{k}"})
            prompt = record.prompt if k == 0 else Episode.start(task, store).messages()
            again.append(record.model_copy(update={"task": task, "prompt": prompt}))
    return again


def positive(text: str) -> int:
    """An argument that must be a whole number above 0 (argparse prints the one-line error)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--anonymize", action="store_true")
    parser.add_argument("--ranking-line", choices=["full", "top", "none"], default="none")
    parser.add_argument("--choice", choices=["top", "uniform"], default="top")
    parser.add_argument("--sft-steps", type=positive, default=600)
    parser.add_argument(
        "--alias-draws",
        type=positive,
        default=1,
        help="with --anonymize: each demonstration day under this many alias draws (distinct demonstrations, so "
        "no day's answer can be memorised from its prompt either)",
    )
    parser.add_argument("--samples", type=positive, default=4, help="samples of each held-out task")
    parser.add_argument("--tasks", type=positive, help="held-out tasks evaluated (the first N; default: all 20)")
    args = parser.parse_args()
    if args.alias_draws > 1 and not args.anonymize:
        parser.error("--alias-draws draws aliases: add --anonymize")
    if args.ranking_line != "none":
        with_ranking_line(args.ranking_line)

    from trade_data.store import MarketStore
    from trade_eval.policy import POLICIES, RunSettings
    from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks, summary_lines
    from trade_reward.schemes import get_scheme
    from trade_reward.taskbuilder import build_tasks
    from trade_reward.taskfolder import read_records
    from trade_train.quickstart.demonstrations import signal_demonstrations
    from trade_train.quickstart.pipeline import STAGES, spread
    from trade_train.quickstart.settings import QuickstartSettings
    from trade_train.quickstart.stages import run_stages
    from trade_train.tiny.model import build_tiny_model
    from trade_train.tiny.sft import tune_on

    # the market and tasks of the tiny model's quickstart (Chinese: anonymized days exist in Chinese only)
    s = QuickstartSettings(model="tiny", prompt_set="compact")
    state = run_stages(args.out / "quickstart", s, STAGES, stop_after="tasks")
    for made in ("tasks-anonymized", "model", "evaluate"):  # a rerun keeps the market and tasks, redoes the rest
        shutil.rmtree(args.out / made, ignore_errors=True)
    data = Path(state.finished["market"].result["data"])
    tasks = Path(state.finished["tasks"].result["tasks"])
    if args.anonymize:
        split = state.finished["tasks"].result["split"]
        tasks = args.out / "tasks-anonymized"
        build_tasks(
            data,
            tasks,
            split=split,
            pool_size=s.pool_size,
            seed=s.seed,
            anonymize=True,
            tools=s.tools.split(","),
            prompt_set=s.prompt_set,
        )
    store = MarketStore.load(data)
    chosen = redrawn(spread(read_records(tasks, "train"), s.demonstrations), args.alias_draws, store)
    demos = signal_demonstrations(store, chosen, store.planted_signal, seed=s.seed, top=args.choice == "top")
    model = build_tiny_model(args.out / "model", seed=s.seed, layers=s.model_layers, hidden=s.model_hidden)
    tuned = tune_on(model, demos, args.sft_steps, seed=s.seed)
    print(f"fine-tune: {tuned.steps} steps in {tuned.seconds:.0f} s, last loss {tuned.last_loss:.3f}")

    records, split, _ = load_tasks(tasks, "test")
    records = records[: args.tasks]
    policy = POLICIES.get("local")
    run = RunSettings(model=str(model), temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed)
    evaluation = TasksEval(store, records, [get_scheme(s.reward)], args.samples)
    manifest = new_manifest(
        evaluation, "local", run, command=["copy_bound.py"], tasks=tasks, split=split, servers=[], data=data
    )
    summary = run_tasks(evaluation, policy, run, args.out / "evaluate", manifest, progress=False)
    print("\n".join(summary_lines(summary)))


if __name__ == "__main__":
    from trade_core.errors import TradeError

    try:
        main()
    except TradeError as error:  # a folder that is no run of this script, a market that cannot be built ...
        sys.exit(f"error: {error.one_line()}")
