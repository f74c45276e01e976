"""The trading agent loop on verl 0.9.1's own rollout path, with the real Qwen3 tokenizer and the real data.

Task rows from ``trade data tasks`` go through verl's RLHFDataset into ``AgentLoopWorker.generate_sequences``,
which builds ``trading_agent`` from the generated ``agent_loops.yaml`` and the TradeTools from ``tools.yaml``,
and scores each trajectory with the reward loop's NaiveRewardManager calling
``trade_train.verl_grpo.schema.compute_score``.
Only the two process boundaries are stood in for: the LLM server and the Ray handle of the reward worker.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

pytest.importorskip("verl")

import torch
import verl
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, DictConfigWrap, ToolListWrap
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.tools.tool_registry import get_tool_class, load_all_tools
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from trade_core.errors import TradeError
from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_reward.taskbuilder import build_tasks
from trade_reward.taskfolder import read_records
from trade_tools.anonymize import EXAMPLE_ALIAS
from trade_tools.episode import DEFAULT_TOOLS, TOOL_TEXT_LIMIT, Episode, Task
from trade_tools.trajectory import Message, read_trajectories
from trade_train.tiny.model import build_tiny_model
from trade_train.verl_grpo import schema as reward_module
from trade_train.verl_grpo.agent_loop import TradingAgentLoop
from trade_train.verl_grpo.files import agent_loops_yaml, tools_yaml
from trade_train.verl_grpo.schema import AGENT_NAME, parquet
from trade_train.verl_grpo.tool import TradeTool

TURNS = 4
RESPONSE_LENGTH = 8192
PROMPT_LENGTH = 4096


WEIGHTS_VERSION = {"global_steps": 0, "min_global_steps": 0, "max_global_steps": 0}
"""What verl's LLMServerClient adds to every reply: the weights version (step) the server generated with."""


def call(name: str, arguments: Any, think: str = "") -> str:
    """A Qwen3 reply making one hermes tool call, as the model emits it."""
    thought = f"<think>\n{think}\n</think>\n\n" if think else ""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{thought}<tool_call>\n{body}\n</tool_call><|im_end|>"


class ReplayServer:
    """verl's LLM server, replayed: each trajectory's replies are fixed texts, picked by its trading day.

    An honest fake at a process boundary. verl's agent loop reaches the rollout server (vLLM) only through
    ``generate(request_id, prompt_ids=..., sampling_params=...) -> TokenOutput``; here the replies come from a
    script, encoded by the real tokenizer, and everything on verl's and our side of that call is real. The
    last reply of a script repeats (a model that never stops). It records the tokens sent, per day.
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, scripts: dict[str, list[str]], marker: str = "交易日T0：{}"
    ) -> None:
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.marker = marker
        """How a script's key shows in its day's prompt (an anonymized prompt shows no date, but its pool)."""
        self.sent: dict[str, list[int]] = defaultdict(list)
        self.replies: dict[str, int] = defaultdict(int)

    async def generate(self, request_id: str, *, prompt_ids: list[int], **_: Any) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        day = next(day for day in self.scripts if self.marker.format(day) in prompt)
        script = self.scripts[day]
        ids = self.tokenizer.encode(script[min(self.replies[day], len(script) - 1)], add_special_tokens=False)
        self.replies[day] += 1
        self.sent[day] += ids
        return TokenOutput(token_ids=ids, stop_reason="completed", extra_fields=dict(WEIGHTS_VERSION))


class TinyModelServer:
    """verl's LLM server as the tiny Qwen3's real forward passes (greedy, a few tokens): an honest fake of vLLM."""

    def __init__(self, model_dir: Path, max_new_tokens: int = 12) -> None:
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.max_new_tokens = max_new_tokens
        self.sent: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], **_: Any) -> TokenOutput:
        with torch.no_grad():
            ids = self.model.generate(
                torch.tensor([prompt_ids]), max_new_tokens=self.max_new_tokens, do_sample=False, top_k=None, top_p=None
            )[0, len(prompt_ids) :].tolist()
        self.sent.append(ids)
        return TokenOutput(token_ids=ids, stop_reason="completed", extra_fields=dict(WEIGHTS_VERSION))


class PickledRayHandle:
    """The reward worker's Ray actor handle: ``compute_score.remote(data)`` pickles its argument, as Ray does,
    so every trajectory is scored on its own copy (and what the loop stores must pickle)."""

    def __init__(self, worker: RewardLoopWorker) -> None:
        self.compute_score = SimpleNamespace(remote=self._remote)
        self.worker = worker

    async def _remote(self, data: DataProto) -> dict[str, Any]:
        return await self.worker.compute_score(pickle.loads(pickle.dumps(data)))


# -- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 folder: the real tokenizer and the config.json verl's HFModelConfig reads."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tasks(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of verl's rows: ``train.parquet`` from a tasks folder, as the trainer writes it."""
    out = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(sample_dataset, out, split="train=2024-06-03:2024-06-28", pool_size="10-12", per_day=1, seed=0)
    (out / "train.parquet").write_bytes(parquet(read_records(out, "train")))
    return out


@pytest.fixture(scope="module")
def rows(tasks: Path) -> dict[str, dict[str, Any]]:
    """The parquet rows by trading day."""
    table = pq.read_table(tasks / "train.parquet").to_pylist()
    return {json.loads(row["extra_info"]["task"])["date"]: row for row in table}


def verl_config(run: Path, tasks: Path, tools: str, model_dir: Path) -> DictConfig:
    """verl's ppo_trainer config composed with the overrides the verl-grpo trainer passes, ``tools`` its tool config."""
    (run / "tools.yaml").write_text(tools, encoding="utf-8")
    (run / "agent_loops.yaml").write_text(agent_loops_yaml(), encoding="utf-8")
    overrides = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={tasks / 'train.parquet'}",
        f"data.val_files={tasks / 'train.parquet'}",
        f"data.max_prompt_length={PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        f"actor_rollout_ref.model.path={model_dir}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={TURNS}",
        f"actor_rollout_ref.rollout.multi_turn.max_tool_response_length={TOOL_TEXT_LIMIT}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={run / 'tools.yaml'}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={run / 'agent_loops.yaml'}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=trading_agent",
        f"reward.custom_reward_function.path={reward_module.__file__}",
        "reward.custom_reward_function.name=compute_score",
    ]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


@pytest.fixture(scope="module")
def config(sample_dataset: Path, tasks: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> DictConfig:
    return verl_config(tmp_path_factory.mktemp("run"), tasks, tools_yaml(sample_dataset), model_dir)


def rollout(config: DictConfig, server: Any, days: list[str]) -> DataProto:
    """One ``generate_sequences`` of the trainer's batch for ``days``, on a worker built as Ray would build it."""

    async def run() -> DataProto:
        # Built inside the running loop: verl's workers keep the event loop they were created in.
        reward = PickledRayHandle(RewardLoopWorker(config))
        worker = AgentLoopWorker(config, llm_client=server, reward_loop_worker_handles=[reward])
        dataset = RLHFDataset([config.data.train_files], worker.tokenizer, config.data, processor=None)
        items = (dataset[i] for i in range(len(dataset)))
        picked = [item for item in items if json.loads(item["extra_info"]["task"])["date"] in days]
        return await worker.generate_sequences(DataProto.from_single_dict(collate_fn(picked)))

    return asyncio.run(run())


def trajectories(out: DataProto) -> dict[str, dict[str, Any]]:
    """Per trading day: the final Episode, the response split by the mask, num_turns and the reward breakdown."""
    found = {}
    for i, stored in enumerate(out.non_tensor_batch["episode"]):
        assert isinstance(stored, str)  # JSON: what Ray ships and compute_score reads
        episode = Episode.model_validate_json(stored)
        length = int(out.batch["attention_mask"][i, PROMPT_LENGTH:].sum())
        response = out.batch["responses"][i, :length]
        mask = out.batch["response_mask"][i, :length]
        assert set(mask.tolist()) <= {0, 1} and not out.batch["response_mask"][i, length:].any()
        found[str(episode.task.date)] = {
            "episode": episode,
            "length": length,
            "model": response[mask == 1].tolist(),
            "tools": response[mask == 0].tolist(),
            "num_turns": int(out.non_tensor_batch["__num_turns__"][i]),
            "reward": {key: out.non_tensor_batch[key][i] for key in out.meta_info["reward_extra_keys"]},
            "rm_score": float(out.batch["rm_scores"][i].sum()),
            "conversation": [Message.model_validate(m) for m in json.loads(out.non_tensor_batch["conversation"][i])],
        }
    return found


def buyable(store: MarketStore, row: dict[str, Any]) -> str:
    """A pool stock 100 shares of which can be bought at T0 (main board, traded, not at limit-up)."""
    task = json.loads(row["extra_info"]["task"])
    view = store.asof(task["date"])
    return next(
        s for s in task["pool"] if not s.startswith("SH688") and not view.is_suspended(s) and not view.at_limit_up(s)
    )


# -- the rollouts ------------------------------------------------------------------------------------

DAYS = {
    "trades": "2024-06-03",
    "t_plus_1": "2024-06-06",
    "bad_json": "2024-06-11",
    "unknown_tool": "2024-06-12",
    "never_stops": "2024-06-13",
    "no_tool_call": "2024-06-17",
    "token_budget": "2024-06-18",
}


@dataclass(frozen=True)
class Replayed:
    out: DataProto
    server: ReplayServer
    stock: dict[str, str]  # the stock each scenario trades


@pytest.fixture(scope="module")
def replayed(
    config: DictConfig, rows: dict[str, dict[str, Any]], sample_store: MarketStore, model_dir: Path
) -> Replayed:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    stock = {name: buyable(sample_store, rows[day]) for name, day in DAYS.items()}
    long_thought = "我需要再仔细想想每一只股票的走势、估值和资金面。\n" * 900
    scripts = {
        DAYS["trades"]: [
            call("get_macro_indicators", {"index": "SH000300"}, think="先看大盘。"),
            call("get_price_data", {"symbol": stock["trades"], "indicators": ["MA5", "RSI_14"]}),
            call("TakeAction", {"type": "buy", "symbol": stock["trades"], "amount": 100, "reasoning": "走势偏强"}),
            call("TakeAction", {"type": "stop", "reasoning": "买入一手，结束"}),
        ],
        DAYS["t_plus_1"]: [
            call("TakeAction", {"type": "buy", "symbol": stock["t_plus_1"], "amount": 100, "reasoning": "试探"}),
            call("TakeAction", {"type": "sell", "symbol": stock["t_plus_1"], "amount": 100, "reasoning": "反悔"}),
            call("TakeAction", {"type": "stop", "reasoning": "结束"}),
        ],
        DAYS["bad_json"]: [
            call("get_macro_indicators", {}),
            call("get_price_data", '{"symbol": "SH600050"'),  # the arguments are a string of broken JSON
            '<tool_call>\n{"name": "get_price_data", "arguments": {"symbol": }\n</tool_call><|im_end|>',
        ],
        DAYS["unknown_tool"]: [
            call("get_news", {"symbol": stock["unknown_tool"]}),
            call("TakeAction", {"type": "stop", "reasoning": "没有新闻工具，结束"}),
        ],
        DAYS["never_stops"]: [call("get_price_data", {"symbol": stock["never_stops"]})],
        DAYS["no_tool_call"]: [call("get_macro_indicators", {}), "今天市场平稳，不调仓。<|im_end|>"],
        DAYS["token_budget"]: [
            call("get_macro_indicators", {}),
            call("TakeAction", {"type": "stop", "reasoning": "结束"}, think=long_thought),
        ],
    }
    assert len(tokenizer.encode(scripts[DAYS["token_budget"]][1])) > RESPONSE_LENGTH
    server = ReplayServer(tokenizer, scripts)
    return Replayed(rollout(config, server, list(DAYS.values())), server, stock)


EXPECTED = {  # status, reward failure, assistant turns, tool turns, tool calls, tool errors, text a tool answered
    "trades": ("stopped", "", 4, 4, 4, 0, "成交：买入"),
    "t_plus_1": ("stopped", "", 3, 3, 3, 0, "T+1不可卖"),
    "bad_json": ("failed", "no_stop", 3, 2, 2, 1, "错误：参数必须是JSON对象"),
    "unknown_tool": ("stopped", "", 2, 2, 2, 1, "错误：未知工具 'get_news'"),
    "never_stops": ("truncated", "truncated", 4, 4, 4, 0, "最新"),
    "no_tool_call": ("failed", "no_stop", 2, 1, 1, 0, "上证指数(SH000001)"),
    "token_budget": ("truncated", "truncated", 2, 1, 1, 0, "上证指数(SH000001)"),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_trajectory_ends_as_its_replies_say(name: str, replayed: Replayed) -> None:
    status, failure, turns, tool_turns, calls, errors, answered = EXPECTED[name]
    found = trajectories(replayed.out)[DAYS[name]]
    episode: Episode = found["episode"]
    assert (episode.status, episode.turns, episode.tool_calls, episode.tool_errors) == (status, turns, calls, errors)
    assert found["num_turns"] == turns + tool_turns + 1  # verl counts the prompt, each reply and each tool turn
    # The mask marks exactly the replayed tokens as the model's, in order; the rest are tool turns.
    sent = replayed.server.sent[DAYS[name]]
    assert found["model"] == sent[: len(found["model"])]
    assert len(found["model"]) == len(sent) or found["length"] == RESPONSE_LENGTH
    tool_text = replayed.server.tokenizer.decode(found["tools"])
    assert tool_text.count("<tool_response>") == tool_turns and answered in tool_text
    assert found["reward"]["failure"] == failure
    assert found["rm_score"] == pytest.approx(found["reward"]["score"])
    # The conversation: the prompt, then each reply and the text each of its calls got.
    conversation = found["conversation"]
    assert [m.role for m in conversation[:2]] == ["system", "user"] and DAYS[name] in conversation[1].content
    replies = [m for m in conversation if m.role == "assistant"]
    assert len(replies) == turns and sum(m.role == "tool" for m in conversation) == calls
    assert answered in "".join(m.content for m in conversation if m.role == "tool")
    if failure:
        assert found["reward"]["score"] == -3.0
    else:
        assert found["reward"]["score"] == found["reward"]["bucket"] and found["reward"]["bucket"] in range(-2, 3)


def test_the_trades_reach_the_reward(replayed: Replayed, rows: dict[str, dict[str, Any]]) -> None:
    found = trajectories(replayed.out)
    bought = found[DAYS["trades"]]["episode"]
    assert [(a.type, a.accepted) for a in bought.actions] == [("buy", True), ("stop", True)]
    assert bought.final_holdings() == {replayed.stock["trades"]: 100}
    refused = found[DAYS["t_plus_1"]]["episode"]
    assert [(a.type, a.accepted) for a in refused.actions] == [("buy", True), ("sell", False), ("stop", True)]
    # verl scored exactly what compute_score makes of the stored Episode and the row's ground truth.
    for day, trajectory in found.items():
        row = rows[day]
        direct = reward_module.compute_score(
            data_source=row["data_source"],
            solution_str="",
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info={"episode": trajectory["episode"].model_dump_json()},
        )
        assert trajectory["reward"] == pytest.approx(direct), day
    assert found[DAYS["trades"]]["reward"]["r_new"] != found[DAYS["trades"]]["reward"]["r_orig"]


def test_the_conversation_keeps_reasoning_raw_arguments_and_unparsed_replies(replayed: Replayed) -> None:
    found = trajectories(replayed.out)

    def replies(name: str) -> list[Message]:
        return [m for m in found[DAYS[name]]["conversation"] if m.role == "assistant"]

    first = replies("trades")[0]
    assert (first.reasoning_content, first.content) == ("先看大盘。", "")
    assert first.tool_calls and first.tool_calls[0].function.name == "get_macro_indicators"
    assert json.loads(first.tool_calls[0].function.arguments) == {"index": "SH000300"}
    # verl's parser drops a call that is not JSON; the record keeps what the model wrote.
    broken = replies("bad_json")[-1]
    assert broken.tool_calls is None and '"arguments": {"symbol": }' in broken.content
    assert replies("no_tool_call")[-1].content == "今天市场平稳，不调仓。"
    cut = replies("token_budget")[-1]  # never parsed: the token budget ended the day first
    assert cut.tool_calls is None and cut.reasoning_content and "<tool_call>" in cut.content


def test_the_turn_budget_lets_every_reply_act(replayed: Replayed) -> None:
    """verl's own max_assistant_turns check would drop the last reply's calls: the stop on reply 4 must run."""
    found = trajectories(replayed.out)
    assert found[DAYS["trades"]]["episode"].turns == TURNS == found[DAYS["never_stops"]]["episode"].turns
    assert found[DAYS["trades"]]["episode"].status == "stopped"
    assert f"超过{TURNS}轮" in found[DAYS["never_stops"]]["episode"].status_reason
    assert "token" in found[DAYS["token_budget"]]["episode"].status_reason


def test_a_real_model_rollout_keeps_the_invariants(config: DictConfig, model_dir: Path) -> None:
    """The tiny model's own tokens (random weights: rarely a tool call): the structure must hold whatever it says."""
    server = TinyModelServer(model_dir)
    (trajectory,) = trajectories(rollout(config, server, ["2024-06-04"])).values()
    episode: Episode = trajectory["episode"]
    assert episode.status != "open" and episode.turns == len(server.sent) >= 1
    assert trajectory["model"] == [token for reply in server.sent for token in reply]
    assert trajectory["rm_score"] == pytest.approx(trajectory["reward"]["score"])


# -- an anonymized task ------------------------------------------------------------------------------

REAL = re.compile(r"(?:SH|SZ|BJ)\d{6}|(?:19|20)\d{2}[-/.年]", re.IGNORECASE)
"""A real code, or a calendar date or year."""


def test_an_anonymized_day_trades_the_real_stock_by_its_alias_and_shows_no_real_code(
    sample_dataset: Path, sample_store: MarketStore, model_dir: Path, tmp_path: Path
) -> None:
    """What verl sends the model (the prompt with the tool schemas its chat template renders, the tool texts)
    holds no real code or date, and the model's alias trades the real stock the reward is computed on."""
    day = "2024-06-03"
    tasks = tmp_path / "tasks"
    build_tasks(sample_dataset, tasks, split=f"train={day}:2024-06-06", pool_size="10-12", per_day=1, anonymize=True)
    (tasks / "train.parquet").write_bytes(parquet(read_records(tasks, "train")))
    config = verl_config(tmp_path, tasks, tools_yaml(sample_dataset, anonymized=True), model_dir)
    (row,) = pq.read_table(tasks / "train.parquet").to_pylist()
    stock = buyable(sample_store, row)
    started = Episode.start(Task.model_validate_json(row["extra_info"]["task"]), sample_store)
    aliases = started.aliases
    assert aliases is not None
    alias = aliases.symbols[stock]
    script = [
        call("get_macro_indicators", {"index": "沪深300指数"}),
        call("get_price_data", {"symbol": alias}),
        call(
            "TakeAction",
            {"type": "buy", "symbol": alias, "amount": started.units_for(stock, 100), "reasoning": "走势偏强"},
        ),
        call("TakeAction", {"type": "stop", "reasoning": "买入一手，结束"}),
    ]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    out = rollout(config, ReplayServer(tokenizer, {alias: script}, marker="{}"), [day])
    found = trajectories(out)[day]
    episode: Episode = found["episode"]
    assert [(a.type, a.symbol, a.accepted) for a in episode.actions] == [("buy", stock, True), ("stop", None, True)]
    assert episode.final_holdings() == {stock: 100} and found["reward"]["failure"] == ""
    prompt = tokenizer.decode(out.batch["prompts"][0], skip_special_tokens=True)
    assert '"name": "get_price_data"' in prompt and EXAMPLE_ALIAS in prompt  # the schemas verl rendered
    tools = tokenizer.decode(found["tools"])
    assert "成交：买入" in tools and alias in tools
    assert REAL.findall(prompt) == REAL.findall(tools) == []
    assert stock in episode.reveal(tools)  # the stored Episode keeps the mapping: records show the real names


# -- the generated config files ----------------------------------------------------------------------


def test_tools_yaml_has_one_trade_tool_per_default_tool(sample_dataset: Path) -> None:
    entries = yaml.safe_load(tools_yaml(sample_dataset))["tools"]
    assert [e["tool_schema"]["function"]["name"] for e in entries] == list(DEFAULT_TOOLS)
    assert all(get_tool_class(e["class_name"]) is TradeTool for e in entries)  # as verl imports it in each worker
    assert all(e["config"] == {"type": "native", "data": str(sample_dataset.resolve())} for e in entries)
    only = yaml.safe_load(tools_yaml(sample_dataset, ["TakeAction"]))["tools"]
    assert [e["tool_schema"]["function"]["name"] for e in only] == ["TakeAction"]
    with pytest.raises(TradeError, match="unknown tool"):
        tools_yaml(sample_dataset, ["get_news"])


def test_agent_loops_yaml_registers_the_loop_by_import_path() -> None:
    [entry] = yaml.safe_load(agent_loops_yaml())
    assert entry["name"] == AGENT_NAME and get_class(entry["_target_"]) is TradingAgentLoop  # hydra instantiates it


def test_the_loop_refuses_a_tool_text_limit_that_would_cut_our_texts(config: DictConfig, model_dir: Path) -> None:
    """verl's default max_tool_response_length (256 characters) would silently cut every price table."""
    limit = OmegaConf.from_dotlist(["actor_rollout_ref.rollout.multi_turn.max_tool_response_length=256"])
    narrow = OmegaConf.merge(config, limit)
    tools = load_all_tools(config.actor_rollout_ref.rollout.multi_turn.tool_config_path, None)
    assert all(isinstance(tool, TradeTool) for tool in tools)
    with pytest.raises(TradeError, match="max_tool_response_length=256"):
        TradingAgentLoop(
            trainer_config=DictConfigWrap(narrow),
            server_manager=None,
            tokenizer=AutoTokenizer.from_pretrained(model_dir),
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(narrow.data),
            hf_model_type="qwen3",
            tools=ToolListWrap(tools),
        )


# -- a training step through TransferQueue, as verl's V1 trainer runs it ------------------------------


@pytest.fixture(scope="module")
def transfer_queue(config: DictConfig) -> Any:
    """A local Ray and verl's TransferQueue (in-memory storage), started as verl's TaskRunner starts them."""
    ray = pytest.importorskip("ray")
    tq = pytest.importorskip("transfer_queue")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    settings = OmegaConf.merge(
        config.transfer_queue, {"enable": True, "backend": {"SimpleStorage": {"num_data_storage_units": 1}}}
    )
    tq.init(settings)
    yield tq
    tq.close()
    ray.shutdown()


def test_a_step_through_transfer_queue_gives_the_metrics_and_records(
    config: DictConfig, model_dir: Path, transfer_queue: Any, tmp_path: Path
) -> None:
    """verl's AgentLoopWorkerTQ runs 3 prompts x 2 rollouts into TransferQueue; verl's trainer ends the step."""
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from trade_core import hookimpl
    from trade_core.plugins import get_manager
    from trade_core.testing import inline_plugin
    from trade_train.verl_grpo.verl_trainer import TradingMetrics, install

    days = {"both_stop": "2024-06-05", "both_unknown_tool": "2024-06-07", "one_of_each": "2024-06-19"}
    stop = call("TakeAction", {"type": "stop", "reasoning": "不调仓"})
    server = ReplayServer(
        AutoTokenizer.from_pretrained(model_dir),
        {  # replies are shared by a day's two rollouts in the order they ask
            days["both_stop"]: [stop],
            days["both_unknown_tool"]: [call("get_news", {})],
            days["one_of_each"]: [stop, "今天不调仓。<|im_end|>"],
        },
    )

    async def run() -> None:
        reward = PickledRayHandle(RewardLoopWorker(config))
        worker = AgentLoopWorkerTQ.__ray_actor_class__(config, llm_client=server, reward_loop_worker_handles=[reward])
        dataset = RLHFDataset([config.data.train_files], worker.tokenizer, config.data, processor=None)
        for index in range(len(dataset)):
            item = dataset[index]
            day = json.loads(item["extra_info"]["task"])["date"]
            if day in days.values():
                prompt = {**item, "uid": f"uid-{day}", "global_steps": 1, "__rollout_n__": 2}
                place = {"step": 1, "sample_index": index, "rollout_n": 0, "validate": False}
                await worker._run_prompt(prompt, {"temperature": 1.0}, trajectory=place)

    started = time.perf_counter()
    asyncio.run(run())
    stored = transfer_queue.kv_list(partition_id="train")["train"]
    keys = sorted(key for key, tag in stored.items() if tag.get("status") == "success")
    assert len(keys) == 6 and all(key.endswith("_0") for key in keys)
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[stored[key] for key in keys])

    # The step's end as verl's sync trainer runs it (its own methods, with the trading metrics installed):
    # GRPO advantages, the step's metrics, the rollout dump. Only the worker groups are not started.
    install()
    trainer_class = get_trainer_cls("sync")
    assert issubclass(trainer_class, TradingMetrics) and issubclass(trainer_class, PPOTrainerSync)
    assert all(issubclass(get_trainer_cls(mode), TradingMetrics) for mode in ("colocate_async", "separate_async"))
    trainer = trainer_class(copy.deepcopy(config))
    trainer._init_tokenizer()  # the parts of verl's _setup that start nothing
    trainer._init_dump_executor()
    trainer._init_resource_pool_mgr()
    trainer.global_steps = 1
    metrics: dict[str, Any] = {}
    trainer._compute_advantage(batch, metrics)
    heard: list[tuple[str, int, dict[str, Any]]] = []

    class Listener:
        @hookimpl
        def trade_step_metrics(self, trainer: str, step: int, metrics: dict[str, Any]) -> None:
            heard.append((trainer, step, dict(metrics)))

    with inline_plugin(get_manager(), Listener(), "listener"):
        trainer._compute_metrics(batch, metrics, {"step": time.perf_counter() - started}, 1, 0)
    assert heard == [("verl-grpo", 1, metrics)]  # a plugin hears the step's metrics, verl's and ours
    assert metrics["critic/score/mean"] == pytest.approx(metrics["trade/reward/score/mean"])  # verl's own, alike
    assert metrics["trade/reward/score/mean"] == pytest.approx((0 + 0 - 3 - 3 + 0 - 3) / 6)
    assert metrics["trade/zero_variance_groups"] == pytest.approx(2 / 3)
    assert metrics["trade/stop_rate"] == pytest.approx(3 / 6)
    assert metrics["trade/tool_error_rate"] == pytest.approx(8 / 11)  # 2 x 4 unknown-tool calls of 2 + 8 + 1
    assert metrics["trade/status/truncated"] == pytest.approx(2 / 6)
    assert metrics["trade/failure/no_valid_call"] == pytest.approx(3 / 6)  # the truncated days made no valid call

    trainer._log_rollout_data(batch, {}, str(tmp_path / "rollouts"))
    trainer._shutdown_dump_executor()
    assert (tmp_path / "rollouts" / "1.jsonl").is_file()  # verl's own dump, beside ours
    path = tmp_path / "rollouts" / "trajectories" / "1.jsonl"
    records = list(read_trajectories(path))
    assert sorted(r.episode.task.date.isoformat() for r in records) == sorted([*days.values()] * 2)
    assert all(r.source == "verl" and r.model == str(model_dir) and r.step == 1 for r in records)
    assert {r.messages[-1].content for r in records if r.episode.status == "failed"} == {"今天不调仓。"}
    # The records carry their ground truth: `trade reward variance` rescores them under any scheme.
    bucketed = run_trade("reward", "variance", str(path), "--json")
    assert bucketed.code == 0, bucketed.err
    assert json.loads(bucketed.out)["zero_variance_share"] == pytest.approx(2 / 3)
