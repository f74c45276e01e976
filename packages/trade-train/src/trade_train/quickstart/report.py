"""``OUT/report.md``: the trained model, its untrained self and the baselines side by side, GRPO step by
step, and what was learned, every number read from the run's own files; ``OUT/report.html`` over the backtests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trade_core.files import atomic_write
from trade_records.metrics import FLAT_REASONS, MetricsLine, read_metrics
from trade_records.runfolder import BacktestSummary, TasksSummary
from trade_train.quickstart.learning import (
    STEP_COLUMNS,
    chance_share,
    exploit_share,
    failure_rate,
    failure_share,
    halves,
    realised_ic,
    reward,
    step_chart,
)
from trade_train.quickstart.settings import EDGE, QuickstartSettings
from trade_train.quickstart.stages import STATE, Context

REPORT, PAGE, CHART = "report.md", "report.html", "grpo.png"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _ranged(value: float | None, interval: Sequence[float] | None, form: str) -> str:
    if value is None:
        return "-"
    return f"{value:{form}}" + ("" if interval is None else f" [{interval[0]:{form}}, {interval[1]:{form}}]")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def side_by_side(summaries: dict[str, TasksSummary], scheme: str) -> list[str]:
    """One row per policy on the held-out tasks: reward and exploit share with intervals, buys, stop and tool-error
    rates with intervals, failures."""
    rows = []
    for side, s in summaries.items():
        rows.append(
            [
                side,
                _ranged(s.mean_reward[scheme], s.mean_reward_ci[scheme], "+.3f"),
                _ranged(s.exploit_share, s.exploit_share_ci, ".0%"),
                "-" if s.buys_per_episode is None else f"{s.buys_per_episode:.2f}",
                _ranged(s.stop_rate, s.stop_rate_ci, ".0%"),
                _ranged(s.tool_error_rate, s.tool_error_rate_ci, ".0%"),
                _pct(failure_rate(s)),
                *(_pct(failure_share(s, reason)) for reason in ("no_valid_call", "truncated", "no_stop")),
                "-" if s.turns_per_episode is None else f"{s.turns_per_episode:.1f}",
            ]
        )
    header = [
        "policy",
        f"mean reward ({scheme}) [95% CI]",
        "exploit share",
        "buys",
        "stop rate",
        "tool-error rate",
        "failures",
        "no valid call",
        "truncated",
        "no stop",
        "turns",
    ]
    return _table(header, rows)


def learning_table(steps: list[MetricsLine]) -> list[str]:
    rows = [
        [
            str(step.step),
            *("-" if (value := figure(step)) is None else f"{value:{form}}" for figure, form in STEP_COLUMNS.values()),
        ]
        for step in steps
    ]
    return _table(["step", *STEP_COLUMNS], rows)


def _apart(a: list[float] | None, b: list[float] | None) -> bool:
    """Whether interval ``a`` lies wholly above interval ``b``."""
    return a is not None and b is not None and a[0] > b[1]


def exploit_lesson(summaries: dict[str, TasksSummary], chance: float | None) -> str:
    """What the exploit shares say, each clause chosen by the numbers it states."""
    trained, untrained = summaries["trained"], summaries["untrained"]
    after, before = trained.exploit_share, untrained.exploit_share
    if after is None or before is None:
        bought = "trained" if after is None else "untrained"
        return f"The {bought} model accepted no buy on the held-out tasks, so no exploit share can be compared. "
    text = (
        f"Of its accepted buys, the trained model bought the signal's top stock in {after:.0%} "
        f"[{_interval(trained.exploit_share_ci, '.0%')}], its untrained self in {before:.0%} "
        f"[{_interval(untrained.exploit_share_ci, '.0%')}]"
        + ("" if chance is None else f" (a pick at random: {chance:.0%})")
        + "; "
    )
    if _apart(trained.exploit_share_ci, untrained.exploit_share_ci):
        ratio = after / before if before else float("inf")
        text += f"the intervals do not overlap: GRPO raised it {ratio:.1f}x. "
    elif _apart(untrained.exploit_share_ci, trained.exploit_share_ci):
        text += "the intervals do not overlap: GRPO lowered it. "
    else:
        text += "the intervals overlap: this run cannot tell the two apart. "
    oracle = summaries.get("oracle-signal")
    if oracle is not None:
        text += (
            f"The oracle, which reads the signal and holds its top stock, scores "
            f"{next(iter(oracle.mean_reward.values())):+.3f} a task: the ceiling of this market. "
        )
    return text


def backtest_notes(summary: BacktestSummary, *, synthetic: bool) -> str:
    """What a quant reader would otherwise misread in the backtest table: the index, and annualised figures over
    a short window."""
    from trade_eval.backtest import INDEX_ROW

    days = max(len(summary.nav.get("dates", [])) - 1, 0)  # the first date is the base close
    per_year = summary.conventions["trading_days_per_year"]
    text = (
        f"Annualised figures ({per_year} trading days a year) extrapolate {days} days: over a window this short "
        "they are noise; read the total return and its interval. "
    )
    if synthetic:
        text += (
            f"`{INDEX_ROW}` here is the synthetic market's own index (float-cap weighted, of its largest stocks), "
            "not the real CSI300."
        )
    return text


def baseline_words(summaries: dict[str, TasksSummary]) -> list[tuple[str, str]]:
    """Each baseline of the run with the description its policy registers."""
    from trade_eval.policy import POLICIES
    from trade_train.quickstart.pipeline import SIDES

    known = POLICIES.all()
    return [(name, known[name].description) for name in summaries if name in known and name not in SIDES]


def tasks_summaries(evaluate: dict[str, Any]) -> dict[str, TasksSummary]:
    """The evaluate stage's summaries (stored as their summary.json) read back through the run-folder model."""
    return {side: TasksSummary.model_validate(summary) for side, summary in evaluate["summaries"].items()}


def _interval(interval: list[float] | None, form: str) -> str:
    return "-" if interval is None else f"{interval[0]:{form}}, {interval[1]:{form}}"


def lessons(
    steps: list[MetricsLine], summaries: dict[str, TasksSummary], verdict: str, scheme: str, chance: float | None
) -> str:
    """The plain paragraph: what moved, what did not, each number from this run and each clause chosen by them."""
    trained, untrained = summaries["trained"], summaries["untrained"]
    rewards = halves(steps, reward)
    text = ""
    if rewards is None:
        text += "GRPO logged no step. "
    else:
        shares = halves(steps, exploit_share)
        (first, last), share = rewards, ""
        if shares is not None:
            share = (
                f", the exploit share from {_ranged(shares[0].mean, shares[0].interval, '.1%')} to "
                f"{_ranged(shares[1].mean, shares[1].interval, '.1%')}"
            )
        text += (
            f"During GRPO ({len(steps)} steps) the mean rollout reward went from "
            f"{_ranged(first.mean, first.interval, '+.3f')} (steps {first.steps[0]}-{first.steps[1]}) to "
            f"{_ranged(last.mean, last.interval, '+.3f')} (steps {last.steps[0]}-{last.steps[1]})"
            f"{share} (each step weighted by its rollouts; [95% interval, steps resampled]); GRPO learns only from "
            f"a group whose rollouts scored differently: {_differing(steps)} here. "
        )
    text += f"On the held-out tasks, trained against untrained: {verdict}. " + exploit_lesson(summaries, chance)
    failed_before, failed_after = failure_rate(untrained), failure_rate(trained)
    text += (
        f"Failures (no valid call, truncated or no stop, each scored below any trade) are "
        f"{_pct(failed_before)} before and {_pct(failed_after)} after; the tool-error rate "
        f"{_pct(untrained.tool_error_rate)} before and {_pct(trained.tool_error_rate)} after."
    )
    return text


def _differing(steps: list[MetricsLine]) -> str:
    """'k of n groups' with a reward difference, over the run's steps."""
    groups = sum(step.metrics.groups or 0 for step in steps)
    flat = sum((step.metrics.groups or 0) * (step.metrics.zero_variance_groups or 0.0) for step in steps)
    return f"{groups - flat:.0f} of {groups:.0f} groups"


def flat_steps(steps: list[MetricsLine]) -> str | None:
    """The line saying how many steps had over half their groups without a reward difference, and why."""
    warned = [step for step in steps if (step.metrics.zero_variance_groups or 0.0) > 0.5]
    if not warned:
        return None
    reasons = {why: sum(step.metrics.zero_variance.get(why, 0.0) for step in warned) for why in FLAT_REASONS}
    named = ", ".join(why.replace("_", " ") for why, total in sorted(reasons.items(), key=lambda kv: -kv[1]) if total)
    return (
        f"Warning: {len(warned)} of {len(steps)} steps had over half their groups without a reward difference "
        f"({named})."
    )


def backtest_rows(summaries: dict[str, BacktestSummary]) -> BacktestSummary:
    """One table: each model's own row (``local`` in its run), then the baselines and the index (the same days
    and pool in both runs, so taken from the trained model's, as are the dates)."""
    trained = summaries["trained"]
    rows = {side: summary.rows["local"] for side, summary in summaries.items()}
    rows |= {name: row for name, row in trained.rows.items() if name != "local"}
    return BacktestSummary(conventions=trained.conventions, rows=rows, nav={"dates": trained.nav["dates"]})


def edge_words(settings: QuickstartSettings) -> str | None:
    """The report's first line where the planted edge is stronger than the default one: a sanity check."""
    from trade_data.signals import PlantedSignal

    default = PlantedSignal.parse(EDGE)
    if settings.planted is None or (planted := PlantedSignal.parse(settings.planted)).ic <= default.ic:
        return None
    return (
        f"**A sanity check with a strong planted edge**: {planted.name} is planted at rank IC {planted.ic:g}, "
        f"above the default {default.ic:g} (`--signal {default.name}:{default.ic:g}`), so that learning shows in "
        "a short run."
    )


def signal_words(store: Any, records: list[Any], planted: str | None) -> str:
    """The planted signal's realised rank IC on the held-out tasks (what the oracle's edge comes from)."""
    from trade_data.signals import PlantedSignal

    if planted is None:
        return ""
    signal = PlantedSignal.parse(planted)
    measured = realised_ic(store, records, signal.name)
    if measured is None:
        return ""
    return (
        f"On these {measured.tasks} held-out tasks the planted {signal.name} (target IC {signal.ic:g}) had a rank IC "
        f"of {_ranged(measured.mean, measured.interval, '+.2f')} with the next day's return across each pool "
        "(mean over tasks [95% interval, tasks resampled])."
    )


def model_words(settings: QuickstartSettings) -> str:
    """What the model was, for the report's first paragraph."""
    from trade_train.pretrained import BASES

    if settings.tiny:
        size = f"{settings.model_layers} layers, hidden {settings.model_hidden}"
        return f"A random-init Qwen3 ({size}) with the real tokenizer"
    if settings.model in BASES:
        base = BASES[settings.model]
        return f"The pretrained {base.description} (`trade model {base.name}`, from {base.requirement}, {base.licence})"
    return f"The model in {settings.model}"


def write_reports(ctx: Context) -> dict[str, Any]:
    from trade_data.store import MarketStore
    from trade_eval.metrics import table_lines
    from trade_eval.report.page import write_report
    from trade_eval.report.runs import load_run
    from trade_reward.taskfolder import read_records
    from trade_train.quickstart.pipeline import SIDES

    s, results = ctx.settings, ctx.results
    summaries = tasks_summaries(results["evaluate"])
    compared = results["evaluate"]["compare"]
    steps = read_metrics(Path(results["grpo"]["run_dir"]))
    atomic_write(ctx.out / CHART, step_chart(steps))
    tasks, tuned, recipe = results["tasks"], results["model"], s.recipe
    trained_layers = f"the top {recipe.train_layers} layers trained" if recipe.train_layers else "every weight trained"
    test = read_records(Path(tasks["tasks"]), "test")
    chance = chance_share([len(r.task.pool) for r in test])
    backtests = [ctx.out / "backtest" / side for side in SIDES]
    page = write_report([load_run(path) for path in backtests], ctx.out / PAGE)
    verdict = compared["verdicts"][0]
    planted = signal_words(MarketStore.load(results["market"]["data"]), test, s.planted)
    trained = summaries["trained"]
    samples = trained.episodes // max(1, summaries["hold"].episodes) if "hold" in summaries else s.samples
    lines = [
        "# trade quickstart",
        "",
        *([edge, ""] if (edge := edge_words(s)) else []),
        f"Data: {results['market']['description']} ({results['market']['data']}); tasks {tasks['split']} "
        f"({tasks['counts']['train']} train, {tasks['counts']['test']} held-out test), tools {s.tools}, prompt set "
        f"{recipe.prompt_set}; seed {s.seed}. {model_words(s)}, fine-tuned {recipe.sft_steps} steps of "
        f"{recipe.sft_batch} on {tuned['demonstrations']} demonstration days (loss {tuned['first_loss']:.2f} -> "
        f"{tuned['last_loss']:.2f}), then {s.steps} GRPO steps (`{recipe.trainer}`) of {s.tasks_per_step} tasks x "
        f"{s.group} rollouts at "
        f"temperature {s.temperature:g}, learning rate {recipe.learning_rate:g} (constant), {trained_layers}, "
        f"reward `{s.reward}`; on CPU in {tuned.get('precision', 'float32')} (`--precision {recipe.precision}`). "
        f"Evaluation samples at the same temperature, {s.recipe.max_tokens} tokens a reply.",
        "",
        f"## Held-out tasks, side by side ({len(test)} tasks; {samples} samples each for the models, one for the "
        f"rules)",
        "",
        *side_by_side(summaries, s.reward),
        "",
        "`untrained` is the fine-tuned model before GRPO, `trained` the same model after it. Exploit share: of a "
        "policy's accepted buys, the share of the pool's top stock by the planted signal among those a buy could "
        "fill; `-` where the data has no planted signal or nothing was bought.",
        "",
        f"Intervals: {trained.interval_method}.",
        "",
        f"Trained against untrained (`trade eval compare`): {verdict}.",
        "",
        f"## GRPO, step by step ({CHART})",
        "",
        f"![GRPO per step]({CHART})",
        "",
        *learning_table(steps),
        "",
        f"Truncated: rollouts our scoring ended on the token budget ({recipe.rollout_tokens} tokens of replies and "
        "tool texts)"
        + (
            "; clipped (TRL): rollouts TRL saw end without an end-of-turn token, which also counts a day that "
            "stopped before the cut or ended on a reply without a call."
            if recipe.trainer == "trl-grpo"
            else "."
        ),
        "",
        *([warning, ""] if (warning := flat_steps(steps)) else []),
        "## What it learned",
        "",
        " ".join(filter(None, [lessons(steps, summaries, verdict, s.reward, chance), planted])),
        "",
    ]
    played = {side: BacktestSummary.model_validate(v) for side, v in results["backtest"]["summaries"].items()}
    table = backtest_rows(played)
    dates = table.nav["dates"]
    lines += [f"## Backtest of the first {len(dates) - 1} held-out days, {dates[1]} to {dates[-1]} ({PAGE})", ""]
    lines += ["```", *table_lines(table), "```", "", backtest_notes(table, synthetic=s.data is None), ""]
    lines += ["Baselines:", "", *(f"- `{name}`: {text}" for name, text in baseline_words(summaries)), ""]
    times = json.loads((ctx.out / STATE).read_text(encoding="utf-8"))["finished"]
    rows = [[name, f"{stage['seconds']:.0f}"] for name, stage in times.items()]
    rows.append(["total", f"{sum(stage['seconds'] for stage in times.values()):.0f}"])
    lines += ["## Stage times (this report's excluded)", "", *_table(["stage", "seconds"], rows)]
    lines += [
        "",
        "## Next",
        "",
        "```bash",
        "trade quickstart --seeds 0,1,2 --out quickstart-seeds   # the same run over three seeds, one report",
        "trade data import ../shared/data/cn-csi300/daily.parquet --out Q \\",
        "    --calendar ../shared/data/cn-csi300/calendar.txt --universe csi300=../shared/data/cn-csi300/csi300.txt",
        f"trade quickstart --data Q --out {ctx.out.name}-real",
        "trade train --model /models/Qwen3-4B --tasks tasks --device npu --run-dir runs/qwen3-4b --dry-run",
        "```",
        "",
    ]
    atomic_write(ctx.out / REPORT, "\n".join(lines))
    return {"report": str(ctx.out / REPORT), "page": str(page.html)}


SEEDS_REPORT = "report.md"
SEED_COLUMNS = [
    "seed",
    "untrained reward",
    "trained reward",
    "trained - untrained [95% CI]",
    "exploit share before",
    "after",
    "seconds",
]


def write_seeds_report(out: Path, runs: dict[int, Path], scheme: str) -> Path:
    """``OUT/report.md`` over ``--seeds``: each seed's paired difference and exploit shares, and their spread;
    the sentences count what the rows show."""
    import statistics

    rows, differences, wins, doubled = [], [], 0, 0
    for seed, folder in runs.items():
        state = json.loads((folder / STATE).read_text(encoding="utf-8"))["finished"]
        evaluate = state["evaluate"]["result"]
        metric = evaluate["compare"]["metrics"][scheme]
        summaries = tasks_summaries(evaluate)
        after, before = summaries["trained"].exploit_share, summaries["untrained"].exploit_share
        wins += metric["ci"] is not None and metric["ci"][0] > 0
        doubled += after is not None and before is not None and after >= 2 * before
        differences.append(metric["difference"])
        rows.append(
            [
                str(seed),
                f"{metric['b']:+.3f}",
                f"{metric['a']:+.3f}",
                _ranged(metric["difference"], metric["ci"], "+.3f"),
                _pct(before),
                _pct(after),
                f"{sum(stage['seconds'] for stage in state.values()):.0f}",
            ]
        )
    spread = statistics.stdev(differences) if len(differences) > 1 else 0.0
    lines = [
        f"# trade quickstart over seeds {', '.join(map(str, runs))}",
        "",
        *_table(SEED_COLUMNS, rows),
        "",
        f"Mean difference {statistics.fmean(differences):+.3f} (sd {spread:.3f} over {len(runs)} seeds). In {wins} of "
        f"{len(runs)} seeds the trained model beats its untrained self with a paired interval that excludes 0; in "
        f"{doubled} of {len(runs)} its exploit share at least doubled. Each seed's own report: "
        + ", ".join(f"[seed {seed}]({folder.name}/{REPORT})" for seed, folder in runs.items())
        + ".",
        "",
    ]
    atomic_write(out / SEEDS_REPORT, "\n".join(lines))
    return out / SEEDS_REPORT
