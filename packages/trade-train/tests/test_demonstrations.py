"""The quickstart's demonstrations on anonymized tasks: the orders they teach are the real orders they mean, typed
in units (an anonymized episode reads an amount as units of the stock's shown scale)."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("trade_eval", reason="the demonstrations play trade-eval's baselines (trade-train[quickstart])")

from trade_data.signals import PlantedSignal
from trade_data.store import MarketStore
from trade_data.synth import write_synthetic_market
from trade_reward.taskbuilder import build_tasks
from trade_reward.taskfolder import TaskRecord, read_records
from trade_tools.episode import Episode
from trade_train.quickstart.demonstrations import SIGNAL_BUY_SHARES, baseline_demonstrations, signal_demonstrations
from trade_train.tiny.scripted import Demonstration


@pytest.fixture(scope="module")
def anonymized_market(tmp_path_factory: pytest.TempPathFactory) -> tuple[MarketStore, list[TaskRecord]]:
    """40 stocks over 2023-01 .. 04 with KMID planted, and an anonymized task (pool of 10) for each of ~45 days."""
    root = tmp_path_factory.mktemp("market")
    data = write_synthetic_market(
        root / "sig", 40, "2023-01-01", "2023-04-30", seed=2, signal=PlantedSignal(name="KMID", ic=0.3)
    )
    build_tasks(data, root / "tasks", split="train=2023-02-01:2023-04-10", pool_size="10", seed=2, anonymize=True)
    return MarketStore.load(data), read_records(root / "tasks", "train")


def _orders(demonstration: Demonstration) -> list[dict]:
    """The buy and sell arguments the demonstration's assistant replies send."""
    calls = [c["function"] for m in demonstration.messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    orders = [json.loads(c["arguments"]) for c in calls if c["name"] == "TakeAction"]
    return [order for order in orders if order["type"] != "stop"]


def test_a_signal_demonstration_buys_its_shares_on_an_anonymized_task(
    anonymized_market: tuple[MarketStore, list[TaskRecord]],
) -> None:
    """The buy a signal demonstration teaches, replayed on its task, fills SIGNAL_BUY_SHARES real shares."""
    store, records = anonymized_market
    assert records and all(record.task.anonymized for record in records)
    bought = 0
    for record, demonstration in zip(records, signal_demonstrations(store, records, "KMID", seed=0), strict=True):
        for order in _orders(demonstration):
            episode = Episode.start(record.task, store)
            episode.call("TakeAction", order)
            assert episode.actions[-1].fill is not None, episode.actions[-1].reason
            assert episode.actions[-1].fill.shares == SIGNAL_BUY_SHARES, record.task.task_id
            bought += 1
    assert bought > len(records) // 2


def test_a_day_that_stops_with_its_orders_is_the_same_day_in_two_replies(
    anonymized_market: tuple[MarketStore, list[TaskRecord]],
) -> None:
    """The pretrained recipe's layout: the factor call, then the buy and the stop as two calls of one reply; the
    same stock bought (the same draws) and the same day's end as the three-reply layout."""
    store, records = anonymized_market
    apart = signal_demonstrations(store, records, "KMID", seed=0)
    together = signal_demonstrations(store, records, "KMID", seed=0, stop_with_orders=True)
    for one, other in zip(apart, together, strict=True):
        assert _orders(one) == _orders(other)
        replies = [m for m in other.messages if m["role"] == "assistant"]
        names = [[c["function"]["name"] for c in m["tool_calls"]] for m in replies]
        assert names[0] == ["compute_alpha_factor"] and len(replies) == 2
        assert names[1] == ["TakeAction"] * (len(_orders(other)) + 1)
        assert json.loads(replies[1]["tool_calls"][-1]["function"]["arguments"])["type"] == "stop"
        tools = [m["content"] for m in other.messages if m["role"] == "tool"]
        assert (
            len(tools) == len(names[1]) + 1
            and tools[-1] == [m["content"] for m in one.messages if m["role"] == "tool"][-1]
        )


def test_a_day_that_walks_the_ranking_buys_the_line_it_stopped_at(
    anonymized_market: tuple[MarketStore, list[TaskRecord]],
) -> None:
    """The pretrained recipe's days: the buy's reply copies the tool's lines from the top (codes as listed) down to
    the one it buys, and buys that code; the same draws as without, every line a stopping point."""
    store, records = anonymized_market
    plain = signal_demonstrations(store, records, "KMID", seed=0, stop_with_orders=True)
    walked = signal_demonstrations(store, records, "KMID", seed=0, stop_with_orders=True, walks_ranking=True)
    stops = set()
    for one, other in zip(plain, walked, strict=True):
        assert _orders(one) == _orders(other)
        replies = [m.get("content", "") for m in other.messages if m["role"] == "assistant"]
        if not _orders(other):
            assert not any(replies)
            continue
        listing = next(m["content"] for m in other.messages if m["role"] == "tool")
        lines = re.findall(r"^(\d+\. \S+):", listing, re.M)
        assert replies[0] == "" and replies[1] == "\n".join(lines[: len(replies[1].splitlines())])
        assert replies[1].splitlines()[-1].split()[-1] == _orders(other)[0]["symbol"]
        stops.add(len(replies[1].splitlines()))
    assert len(stops) >= 6


def test_baseline_demonstrations_on_anonymized_tasks_have_no_refused_order(
    anonymized_market: tuple[MarketStore, list[TaskRecord]],
) -> None:
    store, records = anonymized_market
    demonstrations = baseline_demonstrations(store, records, seed=0)
    replies = [m["content"] for d in demonstrations for m in d.messages if m.get("name") == "TakeAction"]
    assert sum(reply.startswith("成交") for reply in replies) > len(records) // 4
    assert all(reply.startswith(("成交", "已结束")) for reply in replies)
