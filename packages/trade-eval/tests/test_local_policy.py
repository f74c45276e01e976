"""`--policy local`: the tiny Qwen3 taught the tool-call format (`trade model tiny --sft-steps`), run in-process by
transformers, plays a backtest and a tasks run on the real data with no server, the same way twice; requests
generated in one batch write what each writes alone.

The runs need torch, transformers and trade-train[tiny] (`tox -e eval`); they are skipped where those are absent.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from trade_core.errors import TradeError
from trade_core.testing import run_trade
from trade_data.store import MarketStore
from trade_eval.policies.llm import chat_request
from trade_eval.policy import POLICIES, RunSettings
from trade_reward.taskbuilder import build_tasks
from trade_tools.day import TradingDay
from trade_tools.episode import DEFAULT_TOOLS
from trade_tools.sampler import day_task
from trade_tools.toolcalls import HERMES, parse_reply

HAS_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
MISSING = not HAS_TORCH or importlib.util.find_spec("trade_train") is None


def needs_model(test: Callable[..., None]) -> Callable[..., None]:
    """A slow test of the tiny model, skipped without torch, transformers and trade-train[tiny] (tox -e eval)."""
    return pytest.mark.slow(pytest.mark.skipif(MISSING, reason="needs torch, transformers, trade-train[tiny]")(test))


GREEDY = ["--policy", "local", "--temperature", "0", "--max-tokens", "160"]


@pytest.fixture(scope="session")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 untaught: random weights sample widely, so different seeds write different texts."""
    out = tmp_path_factory.mktemp("tiny") / "random"
    made = run_trade("model", "tiny", "--out", str(out))
    assert made.code == 0, made.err
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _tasks_runs(
    model: Path, dataset: Path, tmp_path: Path, seed: int, limit: int, variants: list[list[str]]
) -> list[Path]:
    """Greedy `trade eval tasks` runs of the first ``limit`` tasks of one folder, once per variant of the flags."""
    tasks = tmp_path / "tasks"
    build_tasks(dataset, tasks, split="test=2025-07-01:2025-07-14", pool_size="5", per_day=2, seed=seed)
    runs = []
    for number, flags in enumerate(variants):
        out = tmp_path / f"run{number}"
        run = run_trade(
            "eval", "tasks", *GREEDY, "--model", str(model), "--tasks", str(tasks / "test.jsonl"),
            "--data", str(dataset), "--limit", str(limit), *flags, "--out", str(out),
        )  # fmt: skip
        assert run.code == 0, run.err
        runs.append(out)
    return runs


def _by_task(out: Path) -> list[dict]:
    return sorted(_lines(out / "trajectories.jsonl"), key=lambda t: t["task_id"])


def _calls(trajectories: list[dict]) -> list[dict]:
    return [
        call["function"]
        for t in trajectories
        for m in t["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]


def _messages(out: Path) -> list[list[dict]]:
    return [t["messages"] for t in _lines(out / "trajectories.jsonl")]


def _requests(store: MarketStore, temperature: float, seeds: list[int], max_tokens: int = 40) -> list[dict]:
    """Each seed's first request of a day as the policy sends it: other days and pool sizes, so other prompt
    lengths (the shorter ones left-padded in a batch)."""
    dates = [d.date() for d in store.calendar[-30:]]
    requests = []
    settings = RunSettings(model="tiny", temperature=temperature, top_p=0.9, max_tokens=max_tokens)
    for seed in seeds:
        day = TradingDay.start(day_task(store, dates[seed % len(dates)], pool_size=4 + seed % 5, seed=seed), store)
        requests.append(chat_request(day, settings, day.episode.tool_schemas()) | {"seed": seed})
    return requests


def _written(message: dict) -> tuple[str | None, str | None]:
    """What a reply wrote, its reasoning included: an untaught model's text opens no <tool_call>, so it all reads
    as reasoning (as vLLM's qwen3 parser reads it)."""
    return message["reasoning_content"], message["content"]


def _texts(answers: list[dict]) -> list[dict]:
    return [{"message": a["choices"][0]["message"], "usage": a["usage"]} for a in answers]


def test_local_needs_a_model_folder(tmp_path: Path) -> None:
    policy = POLICIES.get("local")
    assert not policy.needs_server
    with pytest.raises(TradeError, match="needs a model folder"):
        policy.check(RunSettings())
    with pytest.raises(TradeError, match="has no config"):
        policy.check(RunSettings(model=str(tmp_path)))


@pytest.mark.skipif(HAS_TORCH, reason="the hint is for an environment without torch")
def test_without_torch_the_error_names_the_extra(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')
    with pytest.raises(TradeError, match="needs torch and transformers") as refused:
        POLICIES.get("local").check(RunSettings(model=str(tmp_path)))
    assert "trade-eval[local]" in str(refused.value.hint) and "whl/cpu" in str(refused.value.hint)


@needs_model
def test_a_backtest_plays_every_day_in_process_the_same_way_twice(
    tiny_model: Path, sample_dataset: Path, tmp_path: Path
) -> None:
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        run = run_trade(
            "eval",
            "backtest",
            *GREEDY,
            "--model",
            str(tiny_model),
            "--data",
            str(sample_dataset),
            "--start-date",
            "2025-06-20",
            "--num-days",
            "3",
            "--pool-size",
            "5",
            "--max-turns",
            "3",
            "--out",
            str(out),
        )
        assert run.code == 0, run.err
        runs.append(out)
    days = _lines(runs[0] / "days.jsonl")
    assert [d["date"] for d in days] == ["2025-06-20", "2025-06-23", "2025-06-24"]
    assert all(d["status"] == "done" for d in days), [d["reason"] for d in days]
    assert all(d["requests"] >= 1 and d["prompt_tokens"] > 1000 for d in days)
    calls = _calls(_lines(runs[0] / "trajectories.jsonl"))
    assert calls and {c["name"] for c in calls} <= set(DEFAULT_TOOLS)  # parsed from the text, run by the Episode
    assert sum(d["tool_calls"] for d in days) == len(calls)
    assert _messages(runs[0]) == _messages(runs[1])  # greedy and seeded: a rerun writes the same text


@needs_model
def test_a_tasks_run_plays_episodes_concurrently_as_it_plays_them_one_by_one(
    tiny_model: Path, sample_dataset: Path, tmp_path: Path
) -> None:
    runs = _tasks_runs(tiny_model, sample_dataset, tmp_path, 3, 4, [["--concurrency", "4"], ["--concurrency", "1"]])
    episodes = _lines(runs[0] / "episodes.jsonl")
    assert len(episodes) == 4 and all(e["status"] == "done" for e in episodes), [e["reason"] for e in episodes]
    assert _calls(_lines(runs[0] / "trajectories.jsonl"))
    by_task = [_by_task(out) for out in runs]
    assert [t["messages"] for t in by_task[0]] == [t["messages"] for t in by_task[1]]


@needs_model
def test_sampling_is_seeded_by_the_request(random_model: Path) -> None:
    from trade_eval.policies.local import LocalModel

    model = LocalModel(random_model, HERMES, "cpu")
    request = {"messages": [{"role": "user", "content": "今天买什么？"}], "tools": [], "seed": 7, "max_tokens": 16}
    sampled = {**request, "temperature": 1.0, "top_p": 0.9}
    texts = [_written(model.complete(r)["choices"][0]["message"]) for r in (sampled, sampled, {**sampled, "seed": 8})]
    assert texts[0] == texts[1] != texts[2]
    greedy = [model.complete({**request, "temperature": 0, "seed": seed}) for seed in (7, 8)]
    assert greedy[0] == greedy[1] and greedy[0]["usage"]["completion_tokens"] == 16  # no stop: max_tokens
    assert greedy[0]["choices"][0]["finish_reason"] == "length"


def test_a_batch_that_is_not_a_number_of_requests_is_refused_before_loading(tmp_path: Path) -> None:
    for batch in (0, "many", 2.5, True):
        with pytest.raises(TradeError, match="is not a number of requests") as refused:
            POLICIES.get("local").check(RunSettings(model=str(tmp_path), options={"batch": batch}))
        assert refused.value.hint == "e.g. --set batch=16"


@needs_model
@pytest.mark.parametrize("temperature", [0, 1.0])
def test_a_batch_of_one_writes_what_one_generate_call_writes(
    tiny_model: Path, sample_store: MarketStore, temperature: float
) -> None:
    """The unbatched path (the global generator seeded, one prompt, HF sampling with the inverse-CDF sampler)
    against a batch of one, token for token, greedy and sampled."""
    import torch

    from trade_core.cpu_generation import fast_cpu_sampling
    from trade_eval.policies.local import LocalModel

    model = LocalModel(tiny_model, HERMES, "cpu")
    sampling = {"do_sample": True, "temperature": 1.0, "top_p": 0.9} if temperature else {"do_sample": False}
    for request in _requests(sample_store, temperature, [3, 11]):
        inputs = model.tokenizer.apply_chat_template(
            request["messages"],
            tools=request["tools"],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        torch.manual_seed(request["seed"])
        with torch.inference_mode(), fast_cpu_sampling(threads=None):
            output = model.model.generate(**inputs, max_new_tokens=40, **sampling)
        ids = output[0, inputs["input_ids"].shape[1] :].tolist()
        ids = ids[: next((i + 1 for i, token in enumerate(ids) if token in model.stops), len(ids))]
        alone = parse_reply(model.tokenizer.decode(ids, skip_special_tokens=True), HERMES, request["tools"])
        [answer] = model.answer([request])
        message = answer["choices"][0]["message"]
        assert answer["usage"] == {"prompt_tokens": inputs["input_ids"].shape[1], "completion_tokens": len(ids)}
        assert (message["content"], message["reasoning_content"]) == (alone.content, alone.reasoning)
        assert [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]] == alone.calls


@needs_model
def test_greedy_rows_of_a_batch_write_what_each_writes_alone(tiny_model: Path, sample_store: MarketStore) -> None:
    from trade_eval.policies.local import LocalModel

    model = LocalModel(tiny_model, HERMES, "cpu")
    requests = _requests(sample_store, 0, [1, 2, 3, 4, 5])
    batched = _texts(model.answer(requests))
    assert len({row["usage"]["prompt_tokens"] for row in batched}) == len(requests)  # other lengths: padded rows
    assert batched == [_texts(model.answer([request]))[0] for request in requests]
    assert any(row["message"]["tool_calls"] for row in batched)  # the taught model's calls, not only text


@needs_model
def test_each_sampled_row_draws_from_its_own_seed(random_model: Path, sample_store: MarketStore) -> None:
    """The same prompt and seed in two rows of a batch writes the same text; another seed, another text."""
    from trade_eval.policies.local import LocalModel

    model = LocalModel(random_model, HERMES, "cpu")
    [first, other] = _requests(sample_store, 1.0, [7, 8], max_tokens=16)
    other = first | {"seed": other["seed"]}
    texts = [_written(row["message"]) for row in _texts(model.answer([first, other, first]))]
    assert texts[0] == texts[2] != texts[1]


@needs_model
def test_requests_waiting_while_a_generation_runs_are_answered_together(
    random_model: Path, sample_store: MarketStore
) -> None:
    """Submitted while the worker generates a long reply, the others wait and are generated in batches of at most
    --set batch, each answer the one its request gets alone."""
    from trade_eval.policies.local import LocalModel

    model = LocalModel(random_model, HERMES, "cpu", batch=3)
    long, *short = _requests(sample_store, 0, [1, 2, 3, 4, 5, 6], max_tokens=8)
    with structlog.testing.capture_logs() as logs:
        answers = [model.submit(request) for request in [long | {"max_tokens": 64}, *short]]
        answers = [answer.result(timeout=600) for answer in answers]
    batches = [entry["batch"] for entry in logs if entry["event"] == "local.reply"]
    assert len(batches) == 6 and max(batches) > 1 and max(batches) <= 3, batches
    assert _texts(answers[1:]) == [_texts(model.answer([request]))[0] for request in short]


@needs_model
def test_unload_answers_what_waits_then_lets_the_model_go(random_model: Path, sample_store: MarketStore) -> None:
    """A process that evaluates one model after another holds one at a time: what waits is still answered, the
    worker ends, and the next run loads the model afresh."""
    import gc
    import weakref

    from trade_eval.policies.local import _loaded, unload

    settings = RunSettings(model=str(random_model), options={"device": "cpu", "batch": 2})
    model = _loaded(settings)
    assert _loaded(settings) is model  # kept for the run's days
    requests = _requests(sample_store, 0, [1, 2, 3], max_tokens=4)
    waiting = [model.submit(request) for request in requests]
    worker = model.worker
    unload()
    assert [len(answer.result(timeout=600)["choices"]) for answer in waiting] == [1, 1, 1]
    worker.join(timeout=60)
    gone = weakref.ref(model)
    del model, waiting
    gc.collect()
    assert not worker.is_alive() and gone() is None
    again = _loaded(settings)
    assert again.complete(requests[0])["choices"][0]["message"] is not None
    unload()


def test_the_cli_refuses_a_local_run_without_a_model_in_one_line(sample_dataset: Path, tmp_path: Path) -> None:
    for command in (["backtest", "--start-date", "2025-06-20", "--num-days", "2"], ["tasks", "--tasks", "t.jsonl"]):
        run = run_trade("eval", *command, "--policy", "local", "--data", str(sample_dataset), cwd=tmp_path)
        assert run.code == 2 and run.err.strip().splitlines()[-1].startswith("error: policy 'local' needs a model"), (
            run.err
        )
        assert not (tmp_path / "runs").exists()


def test_a_prompt_cache_that_is_not_a_number_of_megabytes_is_refused_before_loading(tmp_path: Path) -> None:
    for memory in (-1, "lots", 1.5, False):
        with pytest.raises(TradeError, match="is not a number of megabytes") as refused:
            POLICIES.get("local").check(RunSettings(model=str(tmp_path), options={"prompt_cache_mb": memory}))
        assert refused.value.hint == "e.g. --set prompt_cache_mb=4096, or 0 to read every prompt whole"


@needs_model
def test_a_prompt_read_from_a_kept_prefix_has_the_keys_and_values_of_the_whole(
    tiny_model: Path, sample_store: MarketStore
) -> None:
    """A day's second-turn prompt read on from its first turn's gives what reading it whole gives, to float
    precision; a prompt seen before is given whole; the oldest prompts go once the memory is spent."""
    import torch

    from trade_core.prompt_cache import PromptCache
    from trade_eval.policies.local import LocalModel

    model = LocalModel(tiny_model, HERMES, "cpu", prompt_cache_mb=0)
    assert not model.prompts.budget
    first, other = _requests(sample_store, 0, [1, 2])

    def template(messages: list[dict], tools: list[dict]) -> list[int]:
        rendered = model.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, return_dict=True
        )
        return rendered["input_ids"]

    ids = template(first["messages"], first["tools"])
    reply = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "compute_alpha_factor", "arguments": {"expression": "ROC20"}}}
        ],
    }
    answer = {"role": "tool", "content": "## ROC20\n1. SH600000: 1.02", "name": "compute_alpha_factor"}
    later = template([*first["messages"], reply, answer], first["tools"])
    assert later[: len(ids)] == ids
    with torch.inference_mode():
        cache = PromptCache(model.model)
        cache.layers(ids)
        assert (cache.read_tokens, cache.given_tokens) == (len(ids), 0)
        pieces = cache.layers(later)
        assert (cache.read_tokens, cache.given_tokens) == (len(later), len(ids))
        whole = PromptCache(model.model).layers(later)
        for (k, v), (k_whole, v_whole) in zip(pieces, whole, strict=True):
            torch.testing.assert_close(k, k_whole)
            torch.testing.assert_close(v, v_whole)
        assert cache.layers(ids) is not None and cache.given_tokens == 2 * len(ids)  # seen: given whole
        other_ids = template(other["messages"], other["tools"])
        shared = next(i for i, (a, b) in enumerate(zip(ids, other_ids, strict=False)) if a != b)
        cache.layers(other_ids)  # another day: the role and rules given, its own facts read
        assert cache.read_tokens == len(later) + len(other_ids) - shared and shared > 100
        assert len(cache.kept) == 3
        small = PromptCache(model.model, budget_mb=1)
        small.budget = cache.size // 3 + 1  # room for about one of these prompts
        for prompt in (ids, later, other_ids):
            small.layers(prompt)
        assert list(small.kept) == [tuple(other_ids)]


@needs_model
def test_a_tasks_run_writes_the_same_with_and_without_the_prompt_cache(
    tiny_model: Path, sample_dataset: Path, tmp_path: Path
) -> None:
    """Greedy, with the prompt cache (each later turn and other day read on from a kept prompt) and with it off."""
    memories = [["--set", "prompt_cache_mb=2048"], ["--set", "prompt_cache_mb=0"]]
    by_task = [_by_task(out) for out in _tasks_runs(tiny_model, sample_dataset, tmp_path, 5, 3, memories)]
    assert [t["messages"] for t in by_task[0]] == [t["messages"] for t in by_task[1]]
    assert sum(len(t["messages"]) > 3 for t in by_task[0]) >= 2  # days of several turns: later prompts read on


@needs_model
@pytest.mark.parametrize("opening", [0, 16])
def test_grouped_attention_and_the_roomy_cache_give_the_numbers_of_transformers_own(
    tiny_model: Path, opening: int
) -> None:
    """The tiny Qwen3 has 4 query heads on 2 key heads: under a batch's padding mask transformers' sdpa repeats the
    keys per head, ours keeps them grouped; a greedy generation on the prompt cache's joined, roomy cache writes
    what generate writes reading the padded batch itself. Prompts that open alike (``opening`` tokens) have that
    opening held once, ahead of the padding, and attended to once for every row."""
    import torch
    from transformers import AutoModelForCausalLM

    from trade_core.cpu_generation import grouped_attention
    from trade_core.prompt_cache import PromptCache

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    torch.manual_seed(0)
    start = torch.randint(10, 1000, (opening,)).tolist()
    prompts = [start + torch.randint(10, 1000, (n,)).tolist() for n in (14, 2, 9)]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    greedy = {"do_sample": False, "max_new_tokens": 12, "pad_token_id": 0}
    with torch.no_grad():
        theirs = model(input_ids=ids, attention_mask=mask).logits
        before = model.generate(input_ids=ids, attention_mask=mask, **greedy)[:, width:]

        grouped_attention(model)
        ours = model(input_ids=ids, attention_mask=mask).logits
        joined_ids, joined_mask, cache = PromptCache(model).joined(prompts, 0, room=4)
        after = model.generate(input_ids=joined_ids, attention_mask=joined_mask, past_key_values=cache, **greedy)
    assert model.config._attn_implementation == "trade_sdpa_gqa"
    torch.testing.assert_close(ours[mask.bool()], theirs[mask.bool()], rtol=1e-5, atol=1e-5)
    assert torch.equal(after[:, joined_ids.shape[1] :], before)
    assert all(type(layer).__name__ == "RoomyLayer" for layer in cache.layers)
    held = opening  # the rows differ from their first own token on
    assert all((layer.prefix is None if not held else layer.prefix[0].shape[-2] == held) for layer in cache.layers)
    assert cache.layers[0].keys.shape[-2] == width + 12 - 1 - held  # each row's own tokens, the decoded included
    assert cache.layers[0].room[0].shape[-2] > 4 + width - held  # it outgrew the room asked for
