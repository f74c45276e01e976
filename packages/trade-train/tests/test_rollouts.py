"""A training step's trading metrics and Trajectory records, from real Episodes scored by the real reward."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_tools.day import TradingDay
from trade_tools.sampler import day_task
from trade_tools.trajectory import read_trajectories, write_trajectories
from trade_train.rollouts import Rollout, step_metrics
from trade_train.verl_grpo.schema import CONVERSATION, EPISODE, REWARD_INFO, compute_score, rollout

DAY = "2024-06-04"


def scored(store: MarketStore, group: str, calls: list[tuple[str, dict]], *, no_call: bool = False) -> Rollout:
    """A day played by ``calls`` (then ended by a reply without a call, if ``no_call``), scored as verl would."""
    task = day_task(store, DAY, pool_size=8, seed=3)
    day = TradingDay.start(task, store)
    for turn, (name, arguments) in enumerate(calls, start=1):
        day.turn(f"<think>\n第{turn}步\n</think>\n\n", [(name, json.dumps(arguments))])
    if no_call:
        day.no_call()
    episode = day.episode
    conversation = [message.model_dump() for message in day.messages]
    truth = ground_truth(store, DAY, [*task.pool, *task.holdings]).model_dump_json()
    reward = compute_score("trade", "", truth, {EPISODE: episode.model_dump_json()})
    fields = {EPISODE: episode.model_dump_json(), CONVERSATION: json.dumps(conversation), REWARD_INFO: reward}
    return rollout(group, reward["score"], fields, truth)


@pytest.fixture(scope="module")
def step(sample_store: MarketStore) -> list[Rollout]:
    """Two GRPO groups of two: one where both rollouts just stop (equal scores), one buy against one failure."""
    pool = day_task(sample_store, DAY, pool_size=8, seed=3).pool
    view = sample_store.asof(DAY)
    stock = next(s for s in pool if not s.startswith("SH688") and not view.at_limit_up(s) and not view.is_suspended(s))
    stop = ("TakeAction", {"type": "stop", "reasoning": "不调仓"})
    buy = ("TakeAction", {"type": "buy", "symbol": stock, "amount": 1000, "reasoning": "看多"})
    return [
        scored(sample_store, "a", [stop]),
        scored(sample_store, "a", [stop]),
        scored(sample_store, "b", [("get_price_data", {"symbol": stock}), buy, stop]),
        scored(sample_store, "b", [("get_news", {"symbol": stock})], no_call=True),
    ]


def test_step_metrics_count_what_happened(step: list[Rollout]) -> None:
    metrics = step_metrics(step).flat()  # as the loggers get them: these names are what users chart
    assert metrics["trade/trajectories"] == 4 and metrics["trade/groups"] == 2
    assert metrics["trade/stop_rate"] == metrics["trade/status/stopped"] == 0.75
    assert metrics["trade/status/failed"] == 0.25 and metrics["trade/status/truncated"] == 0
    assert metrics["trade/tool_error_rate"] == pytest.approx(1 / 6)  # the unknown tool, of 6 calls
    assert metrics["trade/failure/no_valid_call"] == 0.25 and metrics["trade/failure/no_stop"] == 0
    assert metrics["trade/zero_variance_groups"] == 0.5  # group a: both stopped without trading
    assert metrics["trade/turns/mean"] == pytest.approx((1 + 1 + 3 + 1) / 4)
    assert metrics["trade/actions/mean"] == 0.25  # the one accepted buy
    scores = [rollout.score for rollout in step]
    assert scores[3] == -3.0 and scores[0] == scores[1] == 0.0
    assert metrics["trade/reward/score/mean"] == pytest.approx(sum(scores) / 4)
    assert metrics["trade/reward/r_new/mean"] == pytest.approx(sum(r.reward.r_new for r in step) / 4)
    # A failed trajectory has no bucket: it stays out of the mean.
    assert step[3].reward.bucket is None and step[3].reward.failure == "no_valid_call"
    assert metrics["trade/reward/bucket/mean"] == pytest.approx(sum(r.reward.bucket or 0 for r in step[:3]) / 3)
    assert not any(key.startswith("trade/reward/penalty") for key in metrics)  # never set, so not logged
    assert step_metrics([]) is None


def test_a_group_whose_scores_differ_is_not_zero_variance(step: list[Rollout]) -> None:
    assert step_metrics(step[2:]).zero_variance_groups == 0.0
    assert step_metrics(step[:2]).zero_variance_groups == 1.0


def test_unscorable_trajectories_count_as_their_own_failures(step: list[Rollout], sample_store: MarketStore) -> None:
    """A NaN in the ground truth and a ground truth for another day: failure scores, counted, means finite."""
    episode = step[2].episode
    symbols = [*episode.task.pool, *episode.task.holdings]
    bought = next(a.symbol for a in episode.actions if a.accepted and a.type == "buy")
    spoilt = json.loads(ground_truth(sample_store, DAY, symbols).model_dump_json())
    spoilt["growth"][bought] = [math.nan] * 3
    other_day = ground_truth(sample_store, "2024-06-05", symbols).model_dump_json()
    rollouts = []
    for truth in (json.dumps(spoilt), other_day):
        reward = compute_score("trade", "", truth, {EPISODE: episode.model_dump_json()})
        rollouts.append(rollout("c", reward["score"], {EPISODE: episode.model_dump_json(), REWARD_INFO: reward}))
    assert [(r.score, r.reward.failure) for r in rollouts] == [(-3.0, "invalid_outcome"), (-3.0, "malformed")]
    metrics = step_metrics([*step, *rollouts]).flat()
    assert metrics["trade/failure/invalid_outcome"] == metrics["trade/failure/malformed"] == pytest.approx(1 / 6)
    assert metrics["trade/failure/no_valid_call"] == pytest.approx(1 / 6)
    assert all(math.isfinite(value) for value in metrics.values())


def test_continuous_scores_log_no_bucket_mean(sample_store: MarketStore) -> None:
    """A scheme without buckets logs none: verl's placeholder bucket (-99) used to be averaged in."""
    stopped = scored(sample_store, "a", [("TakeAction", {"type": "stop", "reasoning": "不调仓"})])
    reward = compute_score(
        "trade",
        "",
        stopped.ground_truth.model_dump_json(),
        {EPISODE: stopped.episode.model_dump_json()},
        scheme="continuous",
    )
    continuous = rollout("a", reward["score"], {EPISODE: stopped.episode.model_dump_json(), REWARD_INFO: reward})
    assert continuous.reward.bucket is None and "trade/reward/bucket/mean" not in step_metrics([continuous]).flat()


def test_trajectory_records_keep_prompt_replies_and_reward(step: list[Rollout], tmp_path: Path) -> None:
    bought = step[2].trajectory(model="Qwen3-4B", step=7)
    assert bought.source == "verl" and bought.model == "Qwen3-4B" and bought.task_id == step[2].episode.task.task_id
    assert [m.role for m in bought.messages] == ["system", "user"] + ["assistant", "tool"] * 3
    assert "交易日T0：2024-06-04" in bought.messages[1].content
    reply = bought.messages[4]
    assert reply.reasoning_content == "第2步" and reply.content == ""
    assert reply.tool_calls and reply.tool_calls[0].function.name == "TakeAction"
    assert "成交：买入" in bought.messages[5].content and bought.messages[5].tool_call_id == reply.tool_calls[0].id
    assert bought.reward == step[2].reward and bought.step == 7 and bought.reward.score == step[2].score
    assert bought.ground_truth == step[2].ground_truth and bought.ground_truth.date.isoformat() == DAY
    records = [r.trajectory(step=7) for r in step]
    assert list(read_trajectories(write_trajectories(tmp_path / "7.jsonl", records))) == records
