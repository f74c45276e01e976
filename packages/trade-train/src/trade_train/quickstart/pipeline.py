"""The quickstart's stages, each calling the Python API its own command uses (``trade data synth``, ``trade data
tasks``, ``trade model tiny``, ``trade train --trainer trl-grpo|prefix-grpo``, ``trade eval
tasks|compare|backtest|report``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from trade_core.cpu_generation import cpu_precision
from trade_core.files import atomic_write
from trade_data.store import MarketStore
from trade_train.quickstart.settings import SYNTH_END, SYNTH_START
from trade_train.quickstart.stages import Context, Stage

TRAIN_DAYS = 250
"""Trading days of training tasks before the held-out ones (fewer where the data is short)."""
HISTORY = 120
"""Trading days before the first task, for the tools' windows (60-day factors, 20-day momentum)."""
SIDES = ("trained", "untrained")
BASELINES = ("momentum", "equal-weight", "hold", "random")
BACKTEST_POOL = 10
COMMAND = ["trade", "quickstart"]


def market(ctx: Context) -> dict[str, Any]:
    """The dataset: --data as it is, else the synthetic market written into the run folder."""
    from trade_data.info import dataset_info
    from trade_data.signals import PlantedSignal
    from trade_data.synth import write_synthetic_market

    s = ctx.settings
    if s.data is not None:
        MarketStore.load(s.data)  # a folder that is no dataset fails here, in one line
        return {"data": str(s.data.resolve()), "description": dataset_info(s.data).description}
    signal = None if s.planted is None else PlantedSignal.parse(s.planted)
    path = write_synthetic_market(
        ctx.folder("market"), s.recipe.symbols, SYNTH_START, SYNTH_END, seed=s.seed, signal=signal, progress=True
    )
    return {"data": str(path.resolve()), "description": dataset_info(path).description}


def split_spec(store: MarketStore, days: int) -> str:
    """``train=..,test=..``: the last ``days`` T0s held out (with their forward windows), training before them."""
    from trade_core.errors import TradeError
    from trade_reward.forward import HORIZON

    calendar = [d.date() for d in store.calendar]
    test = len(calendar) - days - HORIZON
    first = max(HISTORY, test - HORIZON - TRAIN_DAYS)
    if test - HORIZON - first < 10:
        raise TradeError(
            f"the dataset's {len(calendar)} trading days are too few for {days} held-out days",
            hint=f"use data with at least {HISTORY + days + 2 * HORIZON + 10} trading days, or fewer --days",
        )
    return f"train={calendar[first]}:{calendar[test - 1]},test={calendar[test]}:{calendar[-1]}"


def tasks(ctx: Context) -> dict[str, Any]:
    """Embargoed train and test tasks (`trade data tasks`)."""
    from trade_reward.taskbuilder import build_tasks

    data = Path(ctx.results["market"]["data"])
    spec = split_spec(MarketStore.load(data), ctx.settings.recipe.days)
    summary = build_tasks(
        data,
        ctx.folder("tasks"),
        split=spec,
        universe=ctx.settings.universe,
        pool_size=ctx.settings.pool_size,
        seed=ctx.settings.seed,
        tools=ctx.settings.tools.split(","),
        prompt_set=ctx.settings.recipe.prompt_set,
        progress=True,
    )
    return {
        "tasks": str(ctx.folder("tasks").resolve()),
        "split": spec,
        "counts": {s.name: s.tasks for s in summary.manifest.splits},
    }


def spread(records: list[Any], count: int) -> list[Any]:
    """``count`` of the training records, spread over their days (the demonstrations' days)."""
    return records[:: max(1, len(records) // count)][:count]


def model(ctx: Context) -> dict[str, Any]:
    """The model (`trade model smollm2`, `trade model tiny`, or the user's folder copied), fine-tuned on
    training days played through the Episode: on a market with a planted signal, the signal ranked and a stock
    of the ranking bought at random; else the momentum baseline's days."""
    from tqdm import tqdm

    from trade_reward.taskfolder import read_records
    from trade_train.quickstart.demonstrations import baseline_demonstrations, signal_demonstrations

    s, recipe = ctx.settings, ctx.settings.recipe
    store = MarketStore.load(ctx.results["market"]["data"])
    records = read_records(Path(ctx.results["tasks"]["tasks"]), "train")
    precision = cpu_precision(recipe.precision)
    chosen = spread(records, s.demonstrations)
    if store.planted_signal:
        demos = signal_demonstrations(
            store,
            chosen,
            store.planted_signal,
            seed=s.seed,
            stop_with_orders=recipe.stop_with_orders,
            walks_ranking=recipe.walks_ranking,
        )
    else:
        demos = baseline_demonstrations(store, chosen, seed=s.seed)
    folder = ctx.folder("model")
    with tqdm(total=recipe.sft_steps, desc="fine-tune", unit="step") as bar:

        def advance(step: int, loss: float) -> None:
            bar.set_postfix_str(f"loss {loss:.3f}")
            bar.update()

        if s.tiny:
            from trade_train.tiny.model import build_tiny_model
            from trade_train.tiny.sft import tune_on

            build_tiny_model(folder, seed=s.seed, layers=s.model_layers, hidden=s.model_hidden)
            report = tune_on(
                folder, demos, recipe.sft_steps, learning_rate=recipe.sft_learning_rate, seed=s.seed, progress=advance
            )
        else:
            from trade_train.pretrained import BASES, build_base
            from trade_train.pretrained.sft import tune

            if s.model in BASES:
                build_base(s.model, folder)
            else:
                shutil.copytree(s.model, folder)
            report = tune(
                folder,
                demos,
                recipe.sft_steps,
                batch=recipe.sft_batch,
                learning_rate=recipe.sft_learning_rate,
                train_layers=recipe.train_layers,
                seed=s.seed,
                precision=precision,
                progress=advance,
            )
    return {
        "model": str(folder.resolve()),
        "precision": precision,
        "demonstrations": report.demonstrations,
        "first_loss": report.first_loss,
        "last_loss": report.last_loss,
    }


def grpo(ctx: Context) -> dict[str, Any]:
    """GRPO with the recipe's trainer, in this process (`trade train --trainer trl-grpo|prefix-grpo --device cpu`)."""
    from trade_core.plugins import get_manager
    from trade_core.runs import running
    from trade_train.trl_grpo.run import CONFIG, GRPOSettings, RunConfig

    if ctx.settings.recipe.trainer == "prefix-grpo":
        from trade_train.prefix_grpo.run import train
    else:
        from trade_train.trl_grpo.run import train

    s, recipe = ctx.settings, ctx.settings.recipe
    config = RunConfig(
        model=ctx.results["model"]["model"],
        tasks=Path(ctx.results["tasks"]["tasks"]),
        data=Path(ctx.results["market"]["data"]),
        reward=s.reward,
        device=s.device,
        run_dir=ctx.folder("grpo").resolve(),
        grpo=GRPOSettings(
            steps=s.steps,
            num_generations=s.group,
            batch_size=s.group * s.tasks_per_step,
            temperature=s.temperature,
            max_completion_length=recipe.rollout_tokens,
            max_reply_tokens=recipe.max_tokens if recipe.trainer == "prefix-grpo" else None,
            learning_rate=recipe.learning_rate,
            lr_scheduler="constant",
            train_layers=recipe.train_layers,
            precision=cpu_precision(recipe.precision) if recipe.trainer == "prefix-grpo" else "float32",
            seed=s.seed,
        ),
    )
    atomic_write(config.run_dir / CONFIG, config.model_dump_json(indent=2) + "\n")
    with running("training", config.run_dir, get_manager()):  # plugins hear the training run as under `trade train`
        trained = train(config)
    return {"model": str(trained), "run_dir": str(config.run_dir), "trainer": s.recipe.trainer}


def _local(ctx: Context, side: str, store: MarketStore) -> tuple[str, Any]:
    """The policy and settings that play ``side`` (a model in-process, or a baseline)."""
    from trade_eval.policy import POLICIES, RunSettings

    s = ctx.settings
    if side in SIDES:
        folder = ctx.results["grpo" if side == "trained" else "model"]["model"]
        settings = RunSettings(
            model=folder,
            temperature=s.temperature,
            max_tokens=s.recipe.max_tokens,
            seed=s.seed,
            options={
                "device": "cuda" if s.device == "gpu" else "cpu",
                "batch": s.recipe.eval_batch,
                "precision": s.recipe.precision,
            },
        )
        return "local", (POLICIES.get("local"), settings)
    policy = POLICIES.get(side)
    return side, (policy, policy.for_data(RunSettings(seed=s.seed), store))


def baselines(store: MarketStore) -> tuple[str, ...]:
    """The baselines played beside the models: the oracle too where the market has a planted signal."""
    from trade_eval.backtest import ORACLE

    return (*BASELINES, ORACLE) if store.planted_signal else BASELINES


def evaluate(ctx: Context) -> dict[str, Any]:
    """The held-out test tasks played by the trained model, its untrained self and the baselines (`trade eval
    tasks`), and the trained model compared with its untrained self (`trade eval compare`)."""
    from trade_eval.commands.compare import compare_tasks
    from trade_eval.policies.local import unload
    from trade_eval.single_day import TasksEval, load_tasks, new_manifest, run_tasks
    from trade_reward.schemes import get_scheme

    s = ctx.settings
    folder = Path(ctx.results["tasks"]["tasks"])
    records, split, _ = load_tasks(folder, "test")
    data = Path(ctx.results["market"]["data"])
    store = MarketStore.load(data)
    summaries = {}
    for side in (*SIDES, *baselines(store)):
        name, (policy, settings) = _local(ctx, side, store)
        policy.check(settings)
        # a model samples each task several times; the rules are deterministic (random draws from seed and day)
        evaluation = TasksEval(store, records, [get_scheme(s.reward)], s.samples if side in SIDES else 1)
        manifest = new_manifest(
            evaluation,
            name,
            settings,
            command=[*COMMAND, "evaluate", side],
            tasks=folder,
            split=split,
            servers=[],
            data=data,
        )
        summary = run_tasks(evaluation, policy, settings, ctx.folder("evaluate") / side, manifest)
        unload()  # one model held at a time: two, each with its prompt cache, beside GRPO's leftovers ran out of memory
        summaries[side] = summary.model_dump(mode="json")  # the stage's results are JSON, as summary.json
    out = ctx.folder("evaluate")
    compared = compare_tasks(out / "trained", out / "untrained", 2000, 0.95, ctx.settings.seed)
    compared.pop("header")
    atomic_write(out / "compare.json", json.dumps(compared, indent=2) + "\n")
    return {"summaries": summaries, "compare": compared}


def backtest(ctx: Context) -> dict[str, Any]:
    """The first held-out days as one portfolio, for the trained and the untrained model, each beside the baselines
    and the index (`trade eval backtest --policy local`), with the tools and prompt set they trained on."""
    from trade_eval.backtest import Backtest, new_manifest, run_backtest
    from trade_eval.policies.local import unload
    from trade_reward.taskfolder import read_records

    data = Path(ctx.results["market"]["data"])
    store = MarketStore.load(data)
    test = read_records(Path(ctx.results["tasks"]["tasks"]), "test")
    plan = Backtest(
        store,
        test[0].task.date,
        min(len({r.task.date for r in test}), ctx.settings.recipe.backtest_days),
        pool_size=BACKTEST_POOL,
        universe=ctx.settings.universe,
        seed=ctx.settings.seed,
        tools=tuple(ctx.settings.tools.split(",")),
        prompt_set=ctx.settings.recipe.prompt_set,
    )
    summaries = {}
    for side in SIDES:
        name, (policy, settings) = _local(ctx, side, store)
        manifest = new_manifest(
            plan,
            name,
            settings,
            command=[*COMMAND, "backtest", side],
            data=data,
            pool_file=None,
            pool_size=BACKTEST_POOL,
        )
        played = run_backtest(plan, policy, settings, ctx.folder("backtest") / side, manifest)
        unload()
        summaries[side] = played.model_dump(mode="json")  # the stage's results are JSON, as summary.json
    return {"summaries": summaries}


def report(ctx: Context) -> dict[str, Any]:
    """report.md (everything side by side, the learning table, what was learned) and the backtests' HTML page."""
    from trade_train.quickstart.report import write_reports

    return write_reports(ctx)


STAGES = (
    Stage("market", "market", market),
    Stage("tasks", "tasks (embargoed splits)", tasks),
    Stage("model", "model + tool-call fine-tune", model),
    Stage("grpo", "GRPO (CPU)", grpo),
    Stage("evaluate", "held-out tasks: trained, untrained, baselines", evaluate),
    Stage("backtest", "backtest on the held-out days", backtest),
    Stage("report", "report", report),
)
