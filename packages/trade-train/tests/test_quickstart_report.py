"""The quickstart report's words follow its numbers: the exploit clause, the flat-step warning, the seeds report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trade_records.metrics import MetricsLine
from trade_records.runfolder import TasksSummary
from trade_train.quickstart.report import exploit_lesson, flat_steps, write_seeds_report
from trade_train.quickstart.stages import STATE


def _summary(share: float | None, interval: list[float] | None, reward: float = 0.0) -> TasksSummary:
    """A tasks run's summary with the given exploit share and mean reward; the rest of one played episode."""
    return TasksSummary(
        episodes=1,
        played=1,
        failed=0,
        mean_reward={"continuous": reward},
        mean_reward_ci={"continuous": None},
        stop_rate=1.0,
        stop_rate_ci=None,
        tool_error_rate=0.0,
        tool_error_rate_ci=None,
        buys_per_episode=1.0,
        exploit_share=share,
        exploit_share_ci=interval,
        interval_method="-",
        failure_reasons={},
        turns_per_episode=2.0,
        prompt_tokens_per_episode=None,
        completion_tokens_per_episode=None,
        requests=2,
        retries=0,
        servers={},
    )


def test_the_exploit_clause_says_what_the_intervals_allow() -> None:
    apart = {"trained": _summary(0.5, [0.4, 0.6]), "untrained": _summary(0.125, [0.05, 0.2])}
    text = exploit_lesson(apart, 0.125)
    assert "50% [40%, 60%]" in text and "12% [5%, 20%]" in text and "(a pick at random: 12%)" in text
    assert "the intervals do not overlap: GRPO raised it 4.0x" in text
    overlapping = {"trained": _summary(0.3, [0.12, 0.5]), "untrained": _summary(0.2, [0.11, 0.27])}
    assert "the intervals overlap: this run cannot tell the two apart" in exploit_lesson(overlapping, None)
    lower = {"trained": _summary(0.05, [0.0, 0.1]), "untrained": _summary(0.5, [0.4, 0.6])}
    assert "GRPO lowered it" in exploit_lesson(lower, None)
    nothing = {"trained": _summary(None, None), "untrained": _summary(0.2, [0.1, 0.3])}
    assert exploit_lesson(nothing, None).startswith("The trained model accepted no buy")
    with_oracle = {**apart, "oracle-signal": _summary(1.0, [1.0, 1.0], reward=0.244)}
    assert "scores +0.244 a task: the ceiling of this market" in exploit_lesson(with_oracle, None)


def test_steps_with_mostly_flat_groups_are_counted_with_their_reasons() -> None:
    steps = [
        {"step": 1, "trade/zero_variance_groups": 0.25},
        {
            "step": 2,
            "trade/zero_variance_groups": 0.75,
            "trade/zero_variance/all_failed": 0.5,
            "trade/zero_variance/identical": 0.25,
        },
        {"step": 3, "trade/zero_variance_groups": 1.0, "trade/zero_variance/all_failed": 1.0},
    ]
    assert flat_steps(_lines(steps)) == (
        "Warning: 2 of 3 steps had over half their groups without a reward difference (all failed, identical)."
    )
    assert flat_steps(_lines(steps[:1])) is None


def _seed_run(folder: Path, difference: float, interval: list[float], before: float, after: float) -> Path:
    metric = {"a": 0.1 + difference, "b": 0.1, "difference": difference, "ci": interval}
    evaluate = {
        "compare": {"metrics": {"continuous": metric}},
        "summaries": {
            "trained": _summary(after, None).model_dump(mode="json"),
            "untrained": _summary(before, None).model_dump(mode="json"),
        },
    }
    finished = {"grpo": {"seconds": 100.0, "result": {}}, "evaluate": {"seconds": 50.0, "result": evaluate}}
    folder.mkdir(parents=True)
    (folder / STATE).write_text(json.dumps({"settings": {}, "finished": finished}))
    return folder


def test_the_seeds_report_counts_the_seeds_its_rows_show(tmp_path: Path) -> None:
    runs = {
        0: _seed_run(tmp_path / "seed-0", 0.2, [0.1, 0.3], 0.1, 0.3),
        1: _seed_run(tmp_path / "seed-1", 0.05, [-0.02, 0.12], 0.1, 0.15),
        2: _seed_run(tmp_path / "seed-2", 0.1, [0.01, 0.2], 0.2, 0.4),
    }
    text = write_seeds_report(tmp_path, runs, "continuous").read_text()
    assert "| 0 | +0.100 | +0.300 | +0.200 [+0.100, +0.300] | 10.0% | 30.0% | 150 |" in text
    assert "| 1 | +0.100 | +0.150 | +0.050 [-0.020, +0.120] | 10.0% | 15.0% | 150 |" in text
    assert "Mean difference +0.117 (sd 0.076 over 3 seeds)" in text
    assert "In 2 of 3 seeds the trained model beats its untrained self" in text
    assert "in 2 of 3 its exploit share at least doubled" in text
    assert "[seed 0](seed-0/report.md)" in text


def test_a_run_whose_first_stage_fails_leaves_no_folder_it_created(tmp_path: Path) -> None:
    from trade_core.errors import TradeError
    from trade_train.quickstart.settings import QuickstartSettings
    from trade_train.quickstart.stages import Stage, run_stages

    def refused(context: object) -> dict:
        raise TradeError("refused")

    def done(context: object) -> dict:
        return {}

    settings = QuickstartSettings()
    for folder, stages, kept in [
        (tmp_path / "new", [Stage("a", "A", refused)], False),
        (tmp_path, [Stage("a", "A", refused)], True),  # the user's own folder stays
        (tmp_path / "later", [Stage("a", "A", done), Stage("b", "B", refused)], True),  # a finished stage stays
    ]:
        with pytest.raises(TradeError):
            run_stages(folder, settings, stages)
        assert folder.exists() == kept, folder


def test_half_means_weigh_each_step_by_its_rollouts_and_carry_an_interval() -> None:
    from trade_train.quickstart.learning import exploit_share, halves

    steps = _lines(
        [
            {"step": 1, "trade/trajectories": 16, "trade/exploit_share": 0.0},
            {"step": 2, "trade/trajectories": 2, "trade/exploit_share": 1.0},  # two rollouts: it moves the mean little
            {"step": 3, "trade/trajectories": 16, "trade/exploit_share": 0.5},
            {"step": 4, "trade/trajectories": 16, "trade/exploit_share": 0.5},
        ]
    )
    first, second = halves(steps, exploit_share)
    assert first.mean == pytest.approx(2 / 18) and first.steps == (1, 2)
    assert first.interval is not None and 0.0 <= first.interval[0] <= first.mean <= first.interval[1] <= 1.0
    assert second.mean == 0.5 and second.interval == (0.5, 0.5) and second.steps == (3, 4)
    only = halves(steps[:1], exploit_share)
    assert only is not None and only[0].interval is None and halves(steps, lambda line: line.metrics.buys) is None


def _lines(steps: list[dict]) -> list[MetricsLine]:
    """Metrics lines as a trainer writes them: the figures a test sets, on a step of 8 rollouts by default."""
    base = {"trade/trajectories": 8, "trade/stop_rate": 1.0, "trade/tool_error_rate": 0.0}
    lines = [MetricsLine.from_flat(base | step) for step in steps]
    assert all(lines)
    return lines  # type: ignore[return-value]


def test_the_backtest_notes_say_what_a_short_window_and_a_synthetic_index_mean() -> None:
    """Issue 39: a 20-day window annualised is noise, and the synthetic market's index is not the real CSI300."""
    pytest.importorskip("trade_eval", reason="the quickstart's report needs trade-train[quickstart]")
    from trade_records.runfolder import BacktestSummary
    from trade_train.quickstart.report import backtest_notes

    dates = [f"2024-01-{day:02d}" for day in range(2, 23)]
    summary = BacktestSummary(conventions={"trading_days_per_year": 252}, rows={}, nav={"dates": dates})
    synthetic = backtest_notes(summary, synthetic=True)
    assert synthetic.startswith("Annualised figures (252 trading days a year) extrapolate 20 days")
    assert "synthetic market's own index" in synthetic and "not the real CSI300" in synthetic
    assert "synthetic" not in backtest_notes(summary, synthetic=False)


def test_the_baselines_are_named_with_what_their_policies_do() -> None:
    """Issue 39: the report defines each baseline by its policy's own description ("hold" buys the pool on a day
    without holdings), never the trained or untrained model."""
    pytest.importorskip("trade_eval", reason="the quickstart's report needs trade-train[quickstart]")
    from trade_eval.policy import POLICIES
    from trade_train.quickstart.report import baseline_words

    summaries = {name: _summary(None, None) for name in ("trained", "untrained", "hold", "oracle-signal", "nosuch")}
    words = dict(baseline_words(summaries))
    assert list(words) == ["hold", "oracle-signal"]
    assert words["hold"] == POLICIES.get("hold").description and "buy the pool in equal weights" in words["hold"]


@pytest.mark.parametrize(
    ("flags", "strong"),
    [
        ({"signal": "KMID:0.6"}, True),
        ({"signal": "KMID:0.3"}, False),
        ({"signal": "none"}, False),
        ({"model": "tiny"}, False),  # the tiny model's default edge
        ({}, True),  # the default model's, a pretrained one's: KMID at 0.9
        ({"model": "smollm2"}, True),
        ({"model": "smollm2", "signal": "KMID:0.3"}, False),
    ],
)
def test_a_stronger_edge_than_the_default_is_called_a_sanity_check_in_the_first_line(
    flags: dict[str, str], strong: bool
) -> None:
    from trade_train.quickstart.report import edge_words
    from trade_train.quickstart.settings import QuickstartSettings

    words = edge_words(QuickstartSettings(**flags))
    assert (words is not None) == strong
    if strong:
        assert "sanity check with a strong planted edge" in words and "above the default 0.3" in words


def test_the_realised_ic_of_a_planted_signal_is_measured_on_the_held_out_pools(tmp_path: Path) -> None:
    """On the quickstart's market, a planted KMID ranks the next day's returns; without a plant it does not."""
    from trade_data.signals import PlantedSignal
    from trade_data.store import MarketStore
    from trade_data.synth import write_synthetic_market
    from trade_reward.taskbuilder import build_tasks
    from trade_reward.taskfolder import read_records
    from trade_train.quickstart.learning import realised_ic
    from trade_train.quickstart.pipeline import split_spec
    from trade_train.quickstart.settings import SYNTH_END, SYNTH_START

    measured = {}
    for name, signal in (("planted", PlantedSignal.parse("KMID:0.6")), ("plain", None)):
        data = write_synthetic_market(tmp_path / name, 16, SYNTH_START, SYNTH_END, seed=0, signal=signal)
        store = MarketStore.load(data)
        build_tasks(data, tmp_path / f"{name}-tasks", split=split_spec(store, 40), pool_size="8", seed=0)
        records = read_records(tmp_path / f"{name}-tasks", "test")
        measured[name] = realised_ic(store, records, "KMID")
    planted, plain = measured["planted"], measured["plain"]
    assert planted is not None and plain is not None and planted.tasks == plain.tasks >= 40
    assert planted.interval is not None and planted.interval[0] > 0.2  # near its target: the edge is there
    assert plain.interval is not None and plain.interval[0] < 0 < plain.interval[1]  # no edge to find
