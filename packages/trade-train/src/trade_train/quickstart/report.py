"""``OUT/report.md``: the trained tiny model, its untrained self and the baselines side by side, GRPO step by
step, and what was learned, every number read from the run's own files; ``OUT/report.html`` over the backtests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trade_core.files import atomic_write
from trade_train.quickstart.learning import STEP_COLUMNS, failure_rate, failure_share, halves, step_metrics
from trade_train.quickstart.stages import STATE, Context

REPORT, PAGE = "report.md", "report.html"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _ranged(value: float | None, interval: list[float] | None, form: str) -> str:
    if value is None:
        return "-"
    return f"{value:{form}}" + ("" if interval is None else f" [{interval[0]:{form}}, {interval[1]:{form}}]")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def side_by_side(summaries: dict[str, dict[str, Any]], scheme: str) -> list[str]:
    """One row per policy on the held-out tasks: reward, stop and tool-error rates with intervals, failures."""
    rows = []
    for side, s in summaries.items():
        rows.append([
            side,
            _ranged(s["mean_reward"][scheme], s["mean_reward_ci"][scheme], "+.3f"),
            _ranged(s["stop_rate"], s["stop_rate_ci"], ".0%"),
            _ranged(s["tool_error_rate"], s["tool_error_rate_ci"], ".0%"),
            _pct(failure_rate(s)),
            *(_pct(failure_share(s, reason)) for reason in ("no_valid_call", "truncated", "no_stop")),
            "-" if s["turns_per_episode"] is None else f"{s['turns_per_episode']:.1f}",
        ])  # fmt: skip
    header = ["policy", f"mean reward ({scheme}) [95% CI]", "stop rate", "tool-error rate", "failures",
              "no valid call", "truncated", "no stop", "turns"]  # fmt: skip
    return _table(header, rows)


def learning_table(steps: list[dict[str, float]]) -> list[str]:
    rows = [
        [str(int(step["step"])), *(("-" if key not in step else f"{step[key]:+.3f}" if "reward" in key
                                    else f"{step[key]:.0%}") for key in STEP_COLUMNS)]
        for step in steps
    ]  # fmt: skip
    return _table(["step", *STEP_COLUMNS.values()], rows)


def lessons(steps: list[dict[str, float]], summaries: dict[str, dict[str, Any]], verdict: str, scheme: str) -> str:
    """The plain paragraph: what moved, what did not, each number from this run."""
    trained, untrained, momentum = summaries["trained"], summaries["untrained"], summaries.get("momentum")
    early, late = halves(steps, "trade/reward/score/mean")
    stop_early, stop_late = halves(steps, "trade/stop_rate")
    error_early, error_late = halves(steps, "trade/tool_error_rate")
    text = (
        f"During GRPO ({len(steps)} steps) the mean rollout reward went from {_num(early)} (first half of the "
        f"steps) to {_num(late)} (second half), the stop rate from {_pct(stop_early)} to {_pct(stop_late)} and the "
        f"tool-error rate from {_pct(error_early)} to {_pct(error_late)}. On the held-out tasks the failure rate "
        f"(no valid call, truncated or no stop, each scored as a failure) is {_pct(failure_rate(untrained))} "
        f"before and {_pct(failure_rate(trained))} after, the stop rate {_pct(untrained['stop_rate'])} before and "
        f"{_pct(trained['stop_rate'])} after, the tool-error rate {_pct(untrained['tool_error_rate'])} before and "
        f"{_pct(trained['tool_error_rate'])} after; {verdict}. GRPO learns only from a group whose rollouts scored "
        f"differently: {_differing(steps)} here. "
        if early is not None
        else "GRPO logged no step. "
    )
    if momentum is not None:
        text += (
            f"What a model of this size learns here is the protocol, and mostly from the fine-tune on the baselines' "
            f"days: well-formed calls of the right tools, orders the Episode accepts, and stopping (the failure rate "
            f"above). It does not learn to pick stocks: the momentum rule scores "
            f"{_num(momentum['mean_reward'][scheme])} on the same tasks against {_num(trained['mean_reward'][scheme])} "
            f"for the trained model, and a few steps on a few dozen rollouts could not tell skill from the noise of "
            f"{summaries['trained']['played']} held-out days (the intervals above)."
        )
    return text


def _differing(steps: list[dict[str, float]]) -> str:
    """'k of n groups' with a reward difference, over the run's steps."""
    groups = sum(step.get("trade/groups", 0.0) for step in steps)
    flat = sum(step.get("trade/groups", 0.0) * step.get("trade/zero_variance_groups", 0.0) for step in steps)
    return f"{groups - flat:.0f} of {groups:.0f} groups"


def backtest_rows(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One table: each model's own row (``local`` in its run), then the baselines and the index (the same days
    and pool in both runs, so taken from the trained model's)."""
    trained = summaries["trained"]
    rows = {side: summary["rows"]["local"] for side, summary in summaries.items()}
    rows |= {name: row for name, row in trained["rows"].items() if name != "local"}
    return {"conventions": trained["conventions"], "rows": rows}


def write_reports(ctx: Context) -> dict[str, Any]:
    from trade_eval.metrics import table_lines
    from trade_eval.report.page import write_report
    from trade_eval.report.runs import load_run
    from trade_train.quickstart.pipeline import SIDES

    s, results = ctx.settings, ctx.results
    summaries = results["evaluate"]["summaries"]
    compared = results["evaluate"]["compare"]
    steps = step_metrics(Path(results["grpo"]["run_dir"]))
    tasks, tuned = results["tasks"], results["model"]
    backtests = [ctx.out / "backtest" / side for side in SIDES]
    page = write_report([load_run(path) for path in backtests], ctx.out / PAGE)
    verdict = compared["verdicts"][0]
    lines = [
        "# trade quickstart",
        "",
        f"Data: {'synthetic market' if s.data is None else s.data} ({results['market']['data']}); tasks "
        f"{tasks['split']} ({tasks['counts']['train']} train, {tasks['counts']['test']} held-out test); seed "
        f"{s.seed}; tiny Qwen3 fine-tuned {s.sft_steps} steps on {tuned['demonstrations']} baseline episodes "
        f"(momentum's orders, or hold; loss {tuned['first_loss']:.2f} -> {tuned['last_loss']:.2f}), then {s.steps} "
        f"GRPO steps of {s.group} rollouts at temperature {s.temperature:g}. Evaluation samples at the same "
        f"temperature, {s.max_tokens} tokens a reply.",
        "",
        f"## Held-out tasks, side by side ({summaries['trained']['episodes']} tasks)",
        "",
        *side_by_side(summaries, s.reward),
        "",
        "`untrained` is the fine-tuned model before GRPO, `trained` the same model after it.",
        "",
        f"Intervals: {summaries['trained']['interval_method']}.",
        "",
        f"Trained against untrained (`trade eval compare`): {verdict}.",
        "",
        "## GRPO, step by step",
        "",
        *learning_table(steps),
        "",
        "## What it learns and what it does not",
        "",
        lessons(steps, summaries, verdict, s.reward),
        "",
        f"## Backtest of the held-out days ({PAGE})",
        "",
    ]
    lines += ["```", *table_lines(backtest_rows(results["backtest"]["summaries"])), "```", ""]
    times = json.loads((ctx.out / STATE).read_text(encoding="utf-8"))["finished"]
    rows = [[name, f"{stage['seconds']:.0f}"] for name, stage in times.items()]
    lines += ["## Stage times (this report's excluded)", "", *_table(["stage", "seconds"], rows)]
    lines += [
        "",
        "## Next",
        "",
        "```bash",
        "trade data import ../shared/data/cn-csi300/daily.parquet --out Q \\",
        "    --calendar ../shared/data/cn-csi300/calendar.txt --universe csi300=../shared/data/cn-csi300/csi300.txt",
        f"trade quickstart --data Q --out {ctx.out.name}-real",
        "trade data tasks --data Q --out tasks",
        "trade train --model /models/Qwen3-4B --tasks tasks --device npu --run-dir runs/qwen3-4b --dry-run",
        "```",
        "",
    ]
    atomic_write(ctx.out / REPORT, "\n".join(lines))
    return {"report": str(ctx.out / REPORT), "page": str(page.html)}
