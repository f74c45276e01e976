"""A user's own reward scheme: examples/reward-plugin really pip-installed, then used by name from fresh processes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trade_core import hookimpl
from trade_core.plugins import load_entry_points, new_manager
from trade_core.testing import inline_plugin, run_trade
from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_reward.outcome import outcome
from trade_reward.schemes import SCHEMES, Continuous
from trade_tools.episode import Episode, Task

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "reward-plugin"
TASK = {
    "task_id": "demo",
    "date": "2024-06-14",
    "pool": ["SH600519", "SZ000001"],
    "holdings": {"SZ000001": 1000},
    "cash": 1_000_000.0,
}


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed with real ``.dist-info`` entry points, as ``pip install`` gives a user."""
    target = tmp_path_factory.mktemp("reward-plugin")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True,
    )
    return target


def _env(site: Path, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(site), **extra}


@pytest.mark.slow  # pip-installs the example once per session
def test_the_plugin_is_listed_with_its_distribution(site: Path) -> None:
    run = run_trade("plugins", "--json", env=_env(site))
    assert run.code == 0, run.err
    tanh = next(p for p in json.loads(run.out)["plugins"] if p["name"] == "tanh")
    assert (tanh["distribution"], tanh["version"]) == ("trade-reward-tanh", "0.1.0")
    assert tanh["hooks"] == {"trade_register_reward_schemes": ["tanh"]}

    schemes = {s["name"]: s for s in json.loads(run_trade("reward", "list", "--json", env=_env(site)).out)}
    assert schemes["tanh"]["distribution"] == "trade-reward-tanh"
    assert {s["name"]: s["default"] for s in schemes["tanh"]["settings"]} == {
        "scale": 50.0,
        "loss_aversion": 1.5,
        "failure": -2.0,
    }
    assert "tanh  (trade-reward-tanh 0.1.0, plugin tanh)" in run_trade("reward", "list", env=_env(site)).out


def test_a_scheme_class_registered_instead_of_an_instance_fails_that_plugin_only() -> None:
    class OldStyle(Continuous):
        name = "old-style"

    class Plugin:
        @hookimpl
        def trade_register_reward_schemes(self, register):  # type: ignore[no-untyped-def]
            register(OldStyle)  # one registration style for every item: instances

    manager = new_manager()
    load_entry_points(manager)
    with inline_plugin(manager, Plugin(), "old-style"):
        assert sorted(SCHEMES.all(manager)) == ["bucketed", "continuous"]
    assert [(f.origin.name, f.cause) for f in manager.failures] == [
        ("old-style", "TypeError: registered the class OldStyle, not a RewardScheme")
    ]


@pytest.mark.slow  # pip-installs the example once per session
def test_trade_still_runs_when_trade_reward_is_disabled(site: Path) -> None:
    run = run_trade("plugins", "--json", env=_env(site, TRADE_DISABLE_PLUGINS="reward"))
    assert run.code == 0, run.err
    assert {p["name"] for p in json.loads(run.out)["plugins"]} >= {"tanh", "core"}


BUY_MAOTAI = [{"type": "buy", "symbol": "SH600519", "amount": 100}, {"type": "stop"}]
SELL_PINGAN = [{"type": "sell", "symbol": "SZ000001", "amount": 1000}, {"type": "stop"}]


@pytest.mark.parametrize("actions", [BUY_MAOTAI, SELL_PINGAN])
@pytest.mark.slow  # pip-installs the example once per session
def test_explain_scores_a_real_day_with_the_plugin_scheme(
    site: Path, sample_store: MarketStore, sample_dataset: Path, tmp_path: Path, actions: list[dict[str, object]]
) -> None:
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(TASK))
    run = run_trade(
        "reward",
        "explain",
        "--task",
        str(task_file),
        "--data",
        str(sample_dataset),
        "--actions",
        json.dumps(actions),
        "--scheme",
        "tanh",
        "--json",
        env=_env(site),
    )
    assert run.code == 0, run.err
    reward = json.loads(run.out)["reward"]

    episode = Episode.start(Task.model_validate(TASK), sample_store)
    for action in actions:
        episode.call("TakeAction", action)
    r = outcome(episode, ground_truth(sample_store, TASK["date"], TASK["pool"])).r_outcome
    assert reward["r_outcome"] == pytest.approx(r, abs=1e-12) and reward["scheme"] == "tanh"
    assert reward["score"] == pytest.approx(math.tanh(50 * r) * (1.5 if r < 0 else 1.0))


HAND_CASE = """
import json, sys
from trade_reward.scoring import score_day

# 1,000,000 CNY cash; bought 100 shares at 1000 CNY and paid 50 CNY fees; r_orig = 0 (all cash).
episode = {"task": {"task_id": "hand", "date": "2024-06-14", "pool": ["SH600519"], "cash": 1e6},
           "cash": 899_950.0, "value_before": 1e6, "tool_calls": 2, "status": sys.argv[1],
           "positions": {"SH600519": {"symbol": "SH600519", "shares": 100, "sellable": 0, "cost": 1000.0}}}
truth = {"date": "2024-06-14", "horizon_dates": ["2024-06-17", "2024-06-18", "2024-06-19"],
         "close": {"SH600519": 1000.0}, "growth": {"SH600519": json.loads(sys.argv[2])}}
settings = json.loads(sys.argv[3])
print(score_day(episode, json.dumps(truth), **settings).model_dump_json())
"""


@pytest.mark.parametrize(
    ("status", "growth", "settings", "r_outcome", "score"),
    [
        # V(T+k)/V0 - 1 = -0.00005 + 0.1 x (g_k - 1): 0.00195, 0.00095, -0.00105 -> 0.5/0.3/0.2 -> 0.00105
        ("stopped", [1.02, 1.01, 0.99], {}, 0.00105, 0.0524518187),  # tanh(50 x 0.00105)
        ("stopped", [1.02, 1.01, 0.99], {"scale": 25}, 0.00105, 0.0262439724),  # tanh(25 x 0.00105)
        # -0.00305, -0.00205, -0.00105 -> -0.00235 -> 1.5 x tanh(50 x -0.00235)
        ("stopped", [0.97, 0.98, 0.99], {}, -0.00235, -0.1754433373),
        ("open", [1.02, 1.01, 0.99], {}, 0.00105, -2.0),  # never stopped: failure no_stop
    ],
)
@pytest.mark.slow  # pip-installs the example once per session
def test_a_training_score_by_name_matches_a_hand_calculation(
    site: Path, status: str, growth: list[float], settings: dict[str, float], r_outcome: float, score: float
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", HAND_CASE, status, json.dumps(growth), json.dumps({"scheme": "tanh", **settings})],
        capture_output=True,
        text=True,
        env={**os.environ, **_env(site)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["scheme"] == "tanh" and result["r_orig"] == 0.0
    assert result["r_outcome"] == pytest.approx(r_outcome, abs=1e-12)
    assert result["score"] == pytest.approx(score, abs=1e-9)
    assert result["failure"] == (None if status == "stopped" else "no_stop")


@pytest.mark.slow  # pip-installs the example once per session
def test_the_scheme_refuses_settings_that_let_a_failure_outscore_a_trade(
    site: Path, tmp_path: Path, sample_dataset: Path
) -> None:
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(TASK))
    run = run_trade(
        "reward",
        "explain",
        "--task",
        str(task_file),
        "--data",
        str(sample_dataset),
        "--actions",
        "[]",
        "--scheme",
        "tanh",
        "--set",
        "failure=-1",
        env=_env(site),
    )
    assert run.code == 2 and run.err.startswith("error: bad settings for reward scheme 'tanh'")
    assert "failure must be <= -loss_aversion" in run.err
