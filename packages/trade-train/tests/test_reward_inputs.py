"""Bad reward inputs never earn a reward, and never crash verl's reward workers (``schema.compute_score``).

The rule (README, "Reward"): a wrong configuration (no Episode in ``extra_info``, an unknown scheme, bad
settings or weights) raises a TradeError naming the fix; anything that depends on one trajectory's content
scores that scheme's failure with a reason: ``invalid_outcome`` for a non-finite or impossible number,
``malformed`` for an episode or ground truth that cannot be read or does not belong together.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="hypothesis not installed (the default tox env runs this file)")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_reward.outcome import INVALID, MALFORMED, outcome
from trade_reward.schemes import get_scheme
from trade_tools.episode import Episode, Task
from trade_train.verl_grpo.schema import NO_BUCKET, compute_score, flat, reward_from

NAN, INF = math.nan, math.inf
DAY = "2025-10-14"
FAILURE = {"bucketed": -3.0, "continuous": -1.5}
TOP = {"bucketed": 2.0, "continuous": 1.0}
Json = dict[str, Any]
DELETE = object()


@pytest.fixture(scope="module")
def played(sample_store: MarketStore) -> tuple[Json, Json]:
    """A stopped day that sold part of SZ000001 and bought SH600519, and its ground truth, as plain JSON."""
    task = Task(task_id="t", date=DAY, pool=["SZ000001", "SH600519"], holdings={"SZ000001": 10_000}, cash=500_000.0)
    day = Episode.start(task, sample_store)
    day.call("TakeAction", {"type": "sell", "symbol": "SZ000001", "amount": 6000})
    day.call("TakeAction", {"type": "buy", "symbol": "SH600519", "amount": 100})
    day.call("TakeAction", {"type": "stop", "reasoning": "调仓"})
    truth = ground_truth(sample_store, DAY, ["SZ000001", "SH600519"])
    return json.loads(day.model_dump_json()), json.loads(truth.model_dump_json())


def changed(data: Json, path: tuple[Any, ...], value: Any) -> Json:
    """A deep copy of ``data`` with the value at ``path`` replaced (``DELETE`` removes the key)."""
    data = copy.deepcopy(data)
    *parents, last = path
    node = data
    for key in parents:
        node = node[key]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


def scored(episode: Any, truth: Any, **options: Any) -> dict[str, Any]:
    return compute_score("trade-agent/csi300", "", truth, {"episode": episode}, **options)


def test_the_unchanged_day_scores_normally(played: tuple[Json, Json]) -> None:
    episode, truth = played
    result = scored(json.dumps(episode), json.dumps(truth))
    assert result["failure"] == "" and result["score"] > FAILURE["bucketed"] and result["r_outcome"] != 0


# The reproductions (a NaN scored the top bucket) and impossible numbers: a price or growth <= 0,
# V0 <= 0, negative shares.
BAD_NUMBERS = [
    pytest.param("truth", ("growth", "SH600519"), [NAN, NAN, NAN], id="bought-growth-nan"),
    pytest.param("truth", ("close", "SH600519"), NAN, id="bought-close-nan"),
    pytest.param("episode", ("cash",), NAN, id="cash-nan"),
    pytest.param("episode", ("value_before",), NAN, id="value_before-nan"),
    pytest.param("truth", ("growth", "SZ000001", 1), INF, id="held-growth-inf"),
    pytest.param("truth", ("growth", "SH600519", 2), -INF, id="bought-growth-minus-inf"),
    pytest.param("episode", ("cash",), INF, id="cash-inf"),
    pytest.param("truth", ("close", "SZ000001"), 0.0, id="held-close-zero"),
    pytest.param("truth", ("growth", "SH600519", 0), -1.0, id="growth-negative"),
    pytest.param("episode", ("value_before",), -1.0, id="value_before-negative"),
    pytest.param("episode", ("task", "holdings", "SZ000001"), -10_000, id="holding-negative"),
    pytest.param("episode", ("positions", "SH600519", "shares"), 10**400, id="shares-beyond-float"),
    # finite but impossible (issue 24): beyond the bounds of trade_tools.portfolio, which reading an Episode checks
    pytest.param("episode", ("cash",), 1e308, id="cash-1e308"),
    pytest.param("episode", ("task", "cash"), 1e308, id="task-cash-1e308"),
    pytest.param("episode", ("positions", "SH600519", "shares"), 10**15, id="shares-1e15"),
    pytest.param("episode", ("task", "holdings", "SZ000001"), 10**15, id="holding-1e15"),
]


@pytest.mark.parametrize("scheme", ["bucketed", "continuous"])
@pytest.mark.parametrize(("side", "path", "value"), BAD_NUMBERS)
def test_a_bad_number_scores_the_failure_invalid_outcome(
    played: tuple[Json, Json], scheme: str, side: str, path: tuple[Any, ...], value: Any
) -> None:
    episode, truth = played
    if side == "episode":
        episode = changed(episode, path, value)
    else:
        truth = changed(truth, path, value)
    with capture_logs() as logs:
        result = scored(episode, truth, scheme=scheme)
    assert (result["score"], result["failure"]) == (FAILURE[scheme], INVALID)
    assert all(math.isfinite(result[k]) for k in ("r_new", "r_orig", "r_outcome"))  # step means stay finite
    assert [log["event"] for log in logs] == ["reward_input_refused"] and logs[0]["failure"] == INVALID


@pytest.mark.parametrize(
    ("extra_info", "options", "message"),
    [
        (None, {}, "extra_info has no 'episode'"),
        ({"index": 0}, {}, "extra_info has no 'episode'"),
        ("episode", {}, "extra_info has no 'episode'"),
        ({"episode": "{}"}, {"scheme": "sharpe"}, "unknown reward scheme"),
        ({"episode": "{}"}, {"weights": [0.5, NAN, 0.2]}, "reward weights"),
        ({"episode": "{}"}, {"weights": [0.5, 0.7, -0.2]}, "reward weights"),
        ({"episode": "{}"}, {"weights": ["half", 0.3, 0.2]}, "reward weights"),
        ({"episode": "{}"}, {"weights": []}, "reward weights"),
    ],
)
def test_a_wrong_configuration_raises_with_the_fix(extra_info: Any, options: Json, message: str) -> None:
    """The same for every trajectory, so verl's first reward call fails with one line naming the fix."""
    with pytest.raises(TradeError, match=message) as raised:
        compute_score("x", "", "{}", extra_info, **options)
    assert raised.value.hint


@pytest.mark.parametrize("stored", [None, 0, [], "null"])
def test_a_null_episode_scores_malformed_and_its_batch_goes_on(played: tuple[Json, Json], stored: Any) -> None:
    """Only a missing key is the wrong agent loop; an episode that is there but null is this trajectory's own."""
    with capture_logs() as logs:
        result = scored(stored, played[1])
    assert (result["score"], result["failure"]) == (FAILURE["bucketed"], MALFORMED)
    assert [log["event"] for log in logs] == ["reward_input_refused"]


def test_verl_compute_score_reads_the_episode_from_extra_info(sample_store: MarketStore) -> None:
    task = Task(task_id="t", date=DAY, pool=["SZ000001", "SH600519"], holdings={"SZ000001": 10_000}, cash=500_000.0)
    day = Episode.start(task, sample_store)
    day.call("TakeAction", {"type": "sell", "symbol": "SZ000001", "amount": 10_000})
    day.call("TakeAction", {"type": "stop", "reasoning": "avoid the ex-dividend drop"})
    truth = ground_truth(sample_store, DAY, ["SZ000001", "SH600519"]).model_dump_json()
    scored = compute_score("trade-agent/csi300", "", truth, {"episode": day.model_dump_json(), "index": 0})
    expected = get_scheme("bucketed").score(outcome(day, ground_truth(sample_store, DAY, ["SZ000001", "SH600519"])))
    assert scored == flat(expected) and set(scored) >= {"score", "r_new", "r_orig", "r_outcome", "bucket", "failure"}
    assert all(isinstance(v, (int, float, str)) for v in scored.values())  # verl logs numbers and names only
    assert reward_from(scored["score"], scored) == expected
    continuous = compute_score(
        "x", "", json.loads(truth), {"episode": json.loads(day.model_dump_json())}, scheme="continuous"
    )
    assert continuous["scheme"] == "continuous"
    with pytest.raises(TradeError, match="extra_info has no 'episode'"):
        compute_score("x", "", truth, {})
    truncated = Episode.start(task, sample_store)
    truncated.end("truncated", "超过1轮仍未停止")
    failed = compute_score("x", "", truth, {"episode": truncated.model_dump_json()})
    assert (failed["failure"], failed["bucket"]) == ("no_valid_call", NO_BUCKET)
    assert reward_from(failed["score"], failed).bucket is None and reward_from(0.0, scored).failure is None


def _malformed(played: tuple[Json, Json]) -> list[tuple[Any, Any]]:
    """Episodes and ground truths that cannot be read, or do not belong together."""
    episode, truth = played
    text, truth_text = json.dumps(episode), json.dumps(truth)
    broken: list[Any] = [
        "",
        "{}",
        "null",
        "[]",
        "42",
        "not json",
        text[: len(text) // 2],
        text + "}",
        "[" * 100_000,
        42,
        [],
        [episode],
        {},
        b"{}",
    ]
    episodes = [*broken, *(changed(episode, (key,), DELETE) for key in ("task", "cash", "positions", "value_before"))]
    episodes += [
        changed(episode, ("cash",), "很多"),
        changed(episode, ("task",), None),
        changed(episode, ("task", "date"), "2025-13-40"),
        changed(episode, ("task", "date"), "2025-10-15"),  # the ground truth is for another day
        changed(episode, ("task", "pool"), []),
        changed(episode, ("positions",), []),
        changed(episode, ("positions", "SH600519"), {"symbol": "SH600519"}),
        changed(episode, ("positions", "SH600519", "shares"), "100股"),
        changed(episode, ("status",), "won"),
        changed(episode, ("actions",), {}),
        changed(episode, ("version",), 2),
    ]
    truths = [*broken, None, *(changed(truth, (key,), DELETE) for key in ("date", "horizon_dates", "close", "growth"))]
    truths += [
        changed(changed(truth, ("growth", "SH600519"), DELETE), ("close", "SH600519"), DELETE),  # the bought stock
        changed(truth, ("growth", "SH600519"), DELETE),  # a close without forward prices
        changed(truth, ("close", "SZ000001"), DELETE),  # forward prices without a close
        changed(truth, ("growth", "SH600519"), [1.01]),  # fewer horizons than the truth's dates
        changed(truth, ("horizon_dates",), []),  # no horizon for the three weights
        changed(truth, ("growth", "SH600519", 0), "涨"),
        changed(truth, ("close",), [1.0, 2.0]),
        changed(truth, ("date",), "yesterday"),
    ]
    return [(e, truth_text) for e in episodes] + [(text, t) for t in truths]


def test_malformed_content_scores_the_failure_malformed(played: tuple[Json, Json]) -> None:
    for episode, truth in _malformed(played):
        with capture_logs() as logs:
            result = scored(episode, truth)
        assert (result["score"], result["failure"]) == (-3.0, MALFORMED), (episode, truth)
        assert [log["event"] for log in logs] == ["reward_input_refused"]
        assert len(logs[0]["error"]) <= 300  # one short line, not a 100 KB echo of the input


FINITE_EDGE = [0.0, -0.0, 1e-300, 5e-324, -1.0, 1e300, 1.7e308, -1.7e308]
NON_FINITE = [NAN, INF, -INF]
# Every number the reward reads: the ground truth's closes and growth, the episode's cash, V0 and shares.
NUMBER_FIELDS = [
    ("truth", ("close", "SZ000001")),
    ("truth", ("close", "SH600519")),
    *(("truth", ("growth", s, k)) for s in ("SZ000001", "SH600519") for k in range(3)),
    ("episode", ("cash",)),
    ("episode", ("value_before",)),
    ("episode", ("task", "cash")),
    ("episode", ("task", "holdings", "SZ000001")),
    ("episode", ("positions", "SZ000001", "shares")),
    ("episode", ("positions", "SH600519", "shares")),
]
VALUES = st.one_of(
    st.sampled_from(NON_FINITE + FINITE_EDGE),
    st.floats(),
    st.integers(-(10**400), 10**400),
    st.integers(-(2**64), 2**64),
)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    changes=st.dictionaries(st.sampled_from(range(len(NUMBER_FIELDS))), VALUES, min_size=1, max_size=4),
    scheme=st.sampled_from(["bucketed", "continuous"]),
    as_json=st.booleans(),
)
def test_property_no_number_makes_a_reward_raise_or_beat_the_failure(
    played: tuple[Json, Json], changes: dict[int, Any], scheme: str, as_json: bool
) -> None:
    episode, truth = played
    for index, value in changes.items():
        side, path = NUMBER_FIELDS[index]
        if side == "episode":
            episode = changed(episode, path, value)
        else:
            truth = changed(truth, path, value)
    if as_json:  # as verl ships them; NaN and Infinity are valid in Python's JSON
        episode, truth = json.dumps(episode), json.dumps(truth)
    result = scored(episode, truth, scheme=scheme)
    assert all(math.isfinite(result[k]) for k in ("score", "r_new", "r_orig", "r_outcome"))
    assert FAILURE[scheme] <= result["score"] <= TOP[scheme]
    if any(isinstance(v, float) and not math.isfinite(v) for v in changes.values()):
        assert (result["score"], result["failure"]) in {(FAILURE[scheme], INVALID), (FAILURE[scheme], MALFORMED)}


def _json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key and index path inside a JSON value."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    paths = []
    for key, child in items:
        paths += [(*prefix, key), *_paths(child, (*prefix, key))]
    return paths


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data(), side=st.sampled_from(["episode", "truth"]), how=st.sampled_from(["replace", "delete", "cut"]))
def test_property_fuzzed_inputs_never_raise(
    played: tuple[Json, Json], data: st.DataObject, side: str, how: str
) -> None:
    episode, truth = played
    target = episode if side == "episode" else truth
    if how == "cut":  # a truncated or corrupted JSON text
        text = json.dumps(target)
        at = data.draw(st.integers(0, len(text)))
        target = text[:at] + data.draw(st.text(max_size=3)) + text[at + data.draw(st.integers(0, 3)) :]
    else:
        path = data.draw(st.sampled_from(_paths(target)))
        target = changed(target, path, DELETE if how == "delete" else data.draw(_json_values()))
    result = scored(target, truth) if side == "episode" else scored(episode, target)
    assert math.isfinite(result["score"]) and -3.0 <= result["score"] <= 2.0
    assert result["failure"] in {"", "no_valid_call", "truncated", "no_stop", INVALID, MALFORMED}
