"""``trade reward variance``: how many GRPO groups get no learning signal under a reward scheme.

GRPO normalises each score against the other trajectories of the same prompt; when every score in a
group is equal, every advantage is zero and the group teaches nothing. Scores are recomputed with the
chosen scheme from each stored Episode, so schemes can be compared on the same rollouts.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trade_core.errors import TradeError
from trade_reward.commands.explain import scheme_from, settings_option, task_symbols

if TYPE_CHECKING:
    from trade_data.store import MarketStore
    from trade_tools.grading import GroundTruth
    from trade_tools.trajectory import Trajectory

CONVENTION = (
    "a GRPO group is the trajectories of one task_id (verl's rollout.n samples of one prompt); a group whose "
    "scores are all equal gives every member advantage 0 and teaches nothing"
)
MAX_LISTED = 10
"""Zero-variance groups named in the text output (all of them are in --json)."""


class TruthSource:
    """Ground truth per trajectory: its own if it carries one, else computed from ``data``."""

    def __init__(self, data: Path | None) -> None:
        self.data = data
        self._store: MarketStore | None = None
        self._computed: dict[tuple[str, tuple[str, ...]], GroundTruth] = {}
        self.counts: Counter[str] = Counter()

    def __call__(self, trajectory: Trajectory, number: int) -> GroundTruth:
        from trade_reward.forward import ground_truth

        if trajectory.ground_truth is not None:
            self.counts["trajectory"] += 1
            return trajectory.ground_truth
        if self.data is None:
            raise TradeError(
                f"trajectory {number} ({trajectory.id}) has no ground_truth",
                hint="pass --data DIR to compute it from the dataset",
            )
        task = trajectory.episode.task
        key = (task.date.isoformat(), tuple(task_symbols(task)))
        if key not in self._computed:
            if self._store is None:
                from trade_data.store import MarketStore

                self._store = MarketStore.load(self.data)
            self._computed[key] = ground_truth(self._store, task.date, list(key[1]))
        self.counts["data"] += 1
        return self._computed[key]


def _score_counts(scores: list[float]) -> list[list[float]] | None:
    """[[value, count], ...] when the scores take few values (discrete schemes), else None."""
    counts = Counter(scores)
    return [[value, n] for value, n in sorted(counts.items())] if len(counts) <= 12 else None


def summarise(groups: dict[str, list[float]], failures: Counter[str]) -> dict[str, Any]:
    """Zero-variance share, group sizes and the score distribution of grouped scores."""
    import numpy as np

    scores = np.array([s for group in groups.values() for s in group])
    zero = sorted(key for key, group in groups.items() if len(set(group)) == 1)
    sizes = Counter(len(group) for group in groups.values())
    quantiles = dict(zip(("p10", "p25", "p50", "p75", "p90"), np.percentile(scores, [10, 25, 50, 75, 90]), strict=True))
    return {
        "trajectories": int(scores.size),
        "groups": len(groups),
        "zero_variance_groups": len(zero),
        "zero_variance_share": len(zero) / len(groups),
        "group_sizes": [[size, n] for size, n in sorted(sizes.items())],
        "scores": {
            "mean": float(scores.mean()),
            "std": float(scores.std()),
            "min": float(scores.min()),
            "max": float(scores.max()),
            **{k: float(v) for k, v in quantiles.items()},
            "counts": _score_counts(scores.tolist()),
        },
        "mean_group_std": float(np.mean([np.std(group) for group in groups.values()])),
        "failures": dict(sorted(failures.items())),
        "per_group": [
            {"key": key, "size": len(group), "zero_variance": key in zero, "scores": group}
            for key, group in sorted(groups.items())
        ],
    }


def _text(report: dict[str, Any]) -> str:
    s = report["scores"]
    sizes = ", ".join(f"{size} x {n} group{'s' * (n != 1)}" for size, n in report["group_sizes"])
    distribution = (
        "values " + ", ".join(f"{v:g}: {n}" for v, n in s["counts"])
        if s["counts"] is not None
        else f"min {s['min']:.4g}  p10 {s['p10']:.4g}  p25 {s['p25']:.4g}  median {s['p50']:.4g}  "
        f"p75 {s['p75']:.4g}  p90 {s['p90']:.4g}  max {s['max']:.4g}"
    )
    zero = [g for g in report["per_group"] if g["zero_variance"]]
    named = ", ".join(f"{g['key']} ({g['size']} x {g['scores'][0]:g})" for g in zero[:MAX_LISTED])
    more = f", ... {len(zero) - MAX_LISTED} more (--json lists all)" if len(zero) > MAX_LISTED else ""
    settings = ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in report["settings"].items())
    failures = ", ".join(f"{k} {n}" for k, n in report["failures"].items()) or "none"
    truth = ", ".join(
        f"{n} {'stored in the trajectory' if k == 'trajectory' else 'computed from --data'}"
        for k, n in sorted(report["ground_truth_from"].items())
    )
    return "\n".join(
        [
            f"{report['file']}: {report['trajectories']} trajectories in {report['groups']} groups by {report['by']}",
            f"scheme: {report['scheme']} ({settings})",
            f"zero-variance groups: {report['zero_variance_groups']}/{report['groups']} "
            f"({report['zero_variance_share']:.1%}) have all scores equal",
            f"group sizes: {sizes}",
            f"scores: mean {s['mean']:.4g}  std {s['std']:.4g};  {distribution}",
            f"mean within-group std: {report['mean_group_std']:.4g}",
            f"failures: {failures}",
            f"ground truth: {truth}",
            *([f"zero-variance: {named}{more}"] if zero else []),
            f"convention: {report['convention']}",
        ]
    )


@click.command("variance", short_help="Share of GRPO groups whose scores are all equal under a scheme.")
@click.argument("trajectories", type=click.Path(path_type=Path))
@click.option("--scheme", default="bucketed", show_default=True, help="Reward scheme (`trade reward list`).")
@settings_option
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    help="Dataset to compute the ground truth of trajectories whose reward does not store it.",
)
@click.option(
    "--by",
    type=click.Choice(["task_id", "date"]),
    default="task_id",
    show_default=True,
    help="Group key: task_id (GRPO's groups) or the task's T0 date.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the statistics and every group's scores as JSON.")
def variance_command(
    trajectories: Path, scheme: str, assignments: tuple[str, ...], data: Path | None, by: str, as_json: bool
) -> None:
    """Score every trajectory in TRAJECTORIES (JSONL) with --scheme, group them, and report zero variance.

    Each trajectory is rescored from its stored Episode and its ground truth (its own, or computed from
    --data), so the numbers do not depend on the scheme it was trained with.
    """
    from trade_reward.outcome import outcome
    from trade_tools.trajectory import read_trajectories

    chosen = scheme_from(scheme, assignments)
    truth_of = TruthSource(data)
    groups: dict[str, list[float]] = defaultdict(list)
    failures: Counter[str] = Counter()
    for number, trajectory in enumerate(read_trajectories(trajectories), start=1):
        reward = chosen.score(outcome(trajectory.episode, truth_of(trajectory, number)))
        key = trajectory.task_id if by == "task_id" else trajectory.episode.task.date.isoformat()
        groups[key].append(reward.score)
        if reward.failure:
            failures[reward.failure] += 1
    if not groups:
        raise TradeError(f"{trajectories}: no trajectories")
    report = {
        "file": str(trajectories),
        "scheme": chosen.name,
        "settings": chosen.settings.model_dump(mode="json"),
        "by": by,
        "convention": CONVENTION,
        "ground_truth_from": dict(truth_of.counts),
        **summarise(groups, failures),
    }
    click.echo(json.dumps(report, ensure_ascii=False, indent=2) if as_json else _text(report))
