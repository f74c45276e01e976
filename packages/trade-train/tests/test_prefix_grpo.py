"""`trade train --trainer prefix-grpo`: the shared opening read once gives what reading each row whole gives (the
log-probabilities and their gradients), a group's rows hold exactly the tokens their days were played with, and a
real 2-step run through the CLI writes what a trl-grpo run writes. Needs torch and transformers (tox -e verl)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from trade_core.testing import run_trade

HAS_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch and transformers (tox -e verl)")


@needs_torch
@pytest.mark.parametrize(
    "written",
    [
        [[41, 42, 45], [40, 50, 58], [44, 51]],
        # a group's rows that wrote the same first reply: tokens scored inside the opening, and at its end
        [[20, 21, 30, 41], [20, 21, 40, 50], [20, 21, 44]],
    ],
    ids=["written-after-the-opening", "written-inside-it"],
)
def test_the_opening_read_once_gives_each_row_read_whole(tiny_model: Path, written: list[list[int]]) -> None:
    """Values and gradients (every weight trained, so the gradient must flow back through the shared keys and
    values), rows of other lengths padded on the right, the logits over a temperature."""
    import torch
    from transformers import AutoModelForCausalLM

    from trade_train.logprobs import common_opening, written_logprobs

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    opening = torch.randint(10, 1000, (40,)).tolist()
    sequences = [opening + torch.randint(10, 1000, (n,)).tolist() for n in (7, 19, 12)]
    assert common_opening(sequences) == 40

    rows = written_logprobs(model, sequences, written, temperature=0.7)
    sum(row.sum() for row in rows).backward()
    shared = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    whole = []
    for sequence, positions in zip(sequences, written, strict=True):
        logits = model(input_ids=torch.tensor([sequence])).logits[0] / 0.7
        logprobs = torch.log_softmax(logits.float(), -1)
        whole.append(logprobs[torch.tensor(positions) - 1, torch.tensor(sequence)[positions]])
    sum(row.sum() for row in whole).backward()
    alone = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}

    for got, expected in zip(rows, whole, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert shared.keys() == alone.keys() and "model.embed_tokens.weight" in shared
    for name, grad in shared.items():  # float sums in another order: close to the gradient's own scale
        scale = float(alone[name].abs().max())
        assert float((grad - alone[name]).abs().max()) <= 1e-4 * scale, name


@needs_torch
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])  # bf16 products of float32 weights (autocast)
def test_a_group_holds_the_tokens_its_days_were_played_with(
    tiny_model: Path, tasks: Path, sample_dataset: Path, precision: str
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trade_core.prompt_cache import PromptCache
    from trade_reward.taskfolder import read_records
    from trade_tools.episode import Episode
    from trade_tools.toolcalls import model_format
    from trade_train.prefix_grpo.run import GroupPlayer
    from trade_train.store import market_store
    from trade_train.trl_grpo.run import GRPOSettings

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    grpo = GRPOSettings(max_completion_length=600, temperature=1.0, precision=precision)
    cache = PromptCache(model)
    player = GroupPlayer(model, tokenizer, model_format(tiny_model).tool_calls, grpo, cache)
    records = read_records(tasks, "train")[:2]
    store = market_store(sample_dataset)
    groups = player.play(
        [([Episode.start(r.task, store) for _ in range(3)], r.prompt, seed) for seed, r in enumerate(records)]
    )

    answered, firsts = 0, 0
    for record, rows in zip(records, groups, strict=True):
        first = tokenizer.apply_chat_template(
            record.prompt, tools=rows[0].tools, add_generation_prompt=True, return_dict=True
        )["input_ids"]
        firsts += 2 * (len(first) - 1)
        for row in rows:
            assert row.ids[: row.prompt] == first and not row.day.is_open
            assert row.completion <= grpo.max_completion_length
            replies = [m for m in row.day.messages if m.role == "assistant"]
            segments = _runs(row.written)
            assert len(segments) == len(replies) == row.day.episode.turns
            text = tokenizer.decode(row.ids)
            for _, end in segments[:-1]:  # a reply the day went on after ended its turn, then came its tool texts
                assert row.ids[end - 1] == tokenizer.eos_token_id and end not in row.written
            for message in row.day.messages[len(record.prompt) :]:
                if message.role == "tool" and row.day.messages[-1] is not message:
                    assert message.content in text
                    answered += 1
    assert cache.given_tokens >= firsts  # each group's first prompt read once
    assert answered  # some replies called a tool and read its text


def _runs(positions: list[int]) -> list[tuple[int, int]]:
    """The contiguous runs of positions, as ``(start, end)``."""
    runs: list[tuple[int, int]] = []
    for at in positions:
        if runs and runs[-1][1] == at:
            runs[-1] = (runs[-1][0], at + 1)
        else:
            runs.append((at, at + 1))
    return runs


def test_settings_prefix_grpo_cannot_honour_are_one_line(tasks: Path, tmp_path: Path) -> None:
    base = ["train", "--trainer", "prefix-grpo", "--model", "Qwen/Qwen3-0.6B", "--tasks", str(tasks), "--dry-run"]
    base += ["--run-dir", str(tmp_path / "run")]
    for args, expected in [
        (["--device", "cpu", "--", "beta=0.1"], "prefix-grpo has no KL term and no LoRA (beta=0.1, lora_rank=0)"),
        (["--device", "gpu"], "prefix-grpo trains on cpu, not gpu"),
        (["--device", "cpu", "--", "stepz=3"], "bad prefix-grpo setting: stepz: Extra inputs are not permitted"),
        (["--device", "cpu", "--", "temperature=inf"], "bad prefix-grpo setting: temperature: Input should be a"),
    ]:
        run = run_trade(*base, *args)
        assert run.code == 2 and expected in run.err and len(run.err.strip().splitlines()) == 1, (args, run.err)
    assert not (tmp_path / "run").exists()


def test_settings_only_prefix_grpo_honours_are_refused_by_trl_grpo(tasks: Path, tmp_path: Path) -> None:
    base = ["train", "--trainer", "trl-grpo", "--model", "Qwen/Qwen3-0.6B", "--tasks", str(tasks), "--dry-run"]
    base += ["--device", "cpu", "--run-dir", str(tmp_path / "run"), "--"]
    for override, expected in [
        ("max_reply_tokens=64", "trl-grpo cannot cap a reply apart from the rollout (max_reply_tokens)"),
        ("precision=bfloat16", "trl-grpo trains in float32 (precision)"),
    ]:
        run = run_trade(*base, override)
        assert run.code == 2 and expected in run.err and len(run.err.strip().splitlines()) == 1, (override, run.err)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@needs_torch
def test_two_steps_through_the_cli_write_metrics_trajectories_and_the_model(
    tasks: Path, sample_dataset: Path, tiny_model: Path, tmp_path: Path
) -> None:
    from trade_records.metrics import read_metrics
    from trade_records.runfolder import ROLLOUTS, step_file
    from trade_tools.trajectory import read_trajectories

    run_dir = tmp_path / "run"
    run = run_trade(
        "train", "--trainer", "prefix-grpo", "--model", str(tiny_model), "--tasks", str(tasks), "--data",
        str(sample_dataset), "--device", "cpu", "--reward", "bucketed", "--run-dir", str(run_dir), "--",
        "steps=2", "num_generations=3", "batch_size=6", "max_completion_length=512", "learning_rate=1e-4",
    )  # fmt: skip
    assert run.code == 0, run.err
    lines = read_metrics(run_dir)
    assert [line.step for line in lines] == [1, 2]
    for line in lines:
        assert line.metrics.trajectories == 6 and line.metrics.groups == 2
        assert line.trainer["prefix-grpo/step_seconds"] > 0
        assert line.trainer["prefix-grpo/prompt_tokens_cached"] > 0
    assert [line.trainer["prefix-grpo/learning_rate"] for line in lines] == [1e-4, 5e-5]  # linear, to 0 at the end
    records = [r for step in (1, 2) for r in read_trajectories(step_file(run_dir / ROLLOUTS, step))]
    assert len(records) == 12 and {r.source for r in records} == {"prefix-grpo"}
    assert all(r.reward is not None and r.ground_truth is not None for r in records)
    assert (run_dir / "model" / "config.json").is_file() and (run_dir / "model" / "tokenizer_config.json").is_file()
