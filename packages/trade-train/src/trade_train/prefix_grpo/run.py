"""``python -m trade_train.prefix_grpo.run run.json``: multi-turn GRPO that reads each shared prompt once.

TRL 1.16's tool loop reads every rollout's whole conversation again at each turn and each row of a group reads
the same first prompt for itself; the model reading prompts is most of a small model's step on CPU (a pretrained
base's first prompt is 1,360 tokens, its whole day about 1,900: docs/benchmarks.md, "A pretrained base on two
cores"). Here a group's rows read their shared first prompt once and each later prompt on from the row's previous
one (:class:`~trade_core.prompt_cache.PromptCache`), and the learning pass reads the first prompt once per group
with its keys and values shared by the rows (the gradient flows back through them, so it is the gradient of
reading each row whole). The rest is GRPO as ``trl-grpo`` runs it, from the same ``run.json``
(:class:`~trade_train.trl_grpo.run.RunConfig`): a group of ``num_generations`` rollouts per task, each a day
played through a :class:`~trade_tools.day.TradingDay` (a reply is a turn, ``TakeAction(stop)`` ends the day, a
reply without a call fails it, the turn and token budgets truncate it) and scored by the reward scheme; the
advantage is the reward less its group's mean over the group's standard deviation; one on-policy step per batch
(the policy ratio is 1, so the loss is the advantage-weighted log-likelihood of the written tokens over their
count, with the logits divided by the temperature as TRL does); no KL term (``beta`` must be 0). Each step leaves
what a ``trl-grpo`` step leaves: the metrics line, the Trajectory records, the log line and the plugins' event.
"""

from __future__ import annotations

import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from trade_core.cpu_generation import autocast, fast_cpu_sampling, grouped_attention
from trade_core.errors import TradeError
from trade_core.prompt_cache import PromptCache
from trade_records.metrics import append_metrics
from trade_reward.scoring import score_day
from trade_tools.day import TradingDay
from trade_tools.episode import Episode, EpisodeSettings
from trade_tools.grading import GroundTruth
from trade_tools.records import parse
from trade_tools.toolcalls import model_format, parse_reply
from trade_train.logprobs import written_logprobs
from trade_train.rollouts import Rollout, record_step
from trade_train.trl_grpo.run import CONFIG, GRPOSettings, RunConfig

log = structlog.get_logger("trade.train")

SOURCE = "prefix-grpo"
"""``Trajectory.source`` of the records this trainer writes."""


@dataclass
class Row:
    """One rollout being played: its day, every token of it so far, and which of them the model wrote."""

    day: TradingDay
    tools: list[dict[str, Any]]
    ids: list[int]
    prompt: int
    """Tokens of the first prompt, shared by the group."""
    written: list[int] = field(default_factory=list)

    @property
    def completion(self) -> int:
        return len(self.ids) - self.prompt


class GroupPlayer:
    """Plays a step's groups of rollouts with one model: every open row's replies sampled together (the batch's
    shared opening attended to once), the prompts read on from the prompt cache, each reply played on its row's
    day."""

    def __init__(self, model: Any, tokenizer: Any, fmt: str, grpo: GRPOSettings, cache: PromptCache) -> None:
        self.model, self.tokenizer, self.format, self.grpo, self.cache = model, tokenizer, fmt, grpo, cache
        self.end = tokenizer.eos_token
        self.stops = set(model.generation_config.eos_token_id or [tokenizer.eos_token_id])
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def play(self, groups: list[tuple[list[Episode], list[dict[str, Any]], int]]) -> list[list[Row]]:
        """Each group (its episodes, their first prompt, its seed) played to the end of every row's day."""
        played, generators = [], []
        for episodes, prompt, seed in groups:
            tools = episodes[0].tool_schemas()
            first = self._ids(prompt, tools)
            played.append([Row(TradingDay(e, prompt=prompt), tools, list(first), len(first)) for e in episodes])
            generators += [_generator(seed, row) for row in range(len(episodes))]
        rows = [row for group in played for row in group]
        cap = self.grpo.max_reply_tokens or self.grpo.max_completion_length
        while open_rows := [i for i, row in enumerate(rows) if row.day.is_open]:
            room = [self.grpo.max_completion_length - rows[i].completion for i in open_rows]
            new = min(max(room), cap)
            replies = self._sample([rows[i].ids for i in open_rows], new, [generators[i] for i in open_rows])
            for i, reply, left in zip(open_rows, replies, room, strict=True):
                self._advance(rows[i], reply[:left], left, cap if left > cap else left)
        return played

    def _ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        rendered = self.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, return_dict=True
        )
        return list(rendered["input_ids"])

    def _sample(self, prompts: list[list[int]], new: int, generators: list[Any]) -> list[list[int]]:
        """Each prompt's sampled reply (up to its first end of turn, else ``new`` tokens)."""
        import torch

        g = self.grpo
        with torch.no_grad(), autocast(g.precision), fast_cpu_sampling(threads=None, generators=generators):
            ids, mask, cache = self.cache.joined(prompts, self.pad, room=new)
            output = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                past_key_values=cache,
                pad_token_id=self.pad,
                do_sample=True,
                temperature=g.temperature,
                top_k=g.top_k,  # 0: no top-k
                top_p=1.0,
                max_new_tokens=new,
            )
        replies = []
        for row in output[:, ids.shape[1] :].tolist():
            end = next((i for i, token in enumerate(row) if token in self.stops), None)
            replies.append(row if end is None else row[: end + 1])
        return replies

    def _advance(self, row: Row, reply: list[int], room: int, budget: int) -> None:
        """Play one reply on the row's day; the tool texts it got become the row's next tokens. A reply cut before
        its end of turn ends the day on ``budget`` (the reply's cap, or what the rollout had left)."""
        row.written += range(len(row.ids), len(row.ids) + len(reply))
        row.ids += reply
        day = row.day
        ended = bool(reply) and reply[-1] in self.stops
        parsed = parse_reply(self.tokenizer.decode(reply, skip_special_tokens=True), self.format, row.tools)
        content = (
            parsed.content if parsed.reasoning is None else f"<think>\n{parsed.reasoning}\n</think>\n\n{parsed.content}"
        )
        if not ended:  # the reply's or the rollout's tokens ran out inside the reply
            day.reply(content, parsed.calls)
            day.out_of_tokens(budget)
            return
        day.turn(content, parsed.calls)
        if day.is_open:
            answers = self._tool_text(day)
            if len(answers) + len(reply) >= room:  # no room for the tool texts and a reply after them
                day.out_of_tokens(self.grpo.max_completion_length)
            else:
                row.ids += answers

    def _tool_text(self, day: TradingDay) -> list[int]:
        """The tokens the chat template puts after the reply's end of turn: its tool texts, then the next
        generation prompt (tokenized apart from the reply, as TRL and the fine-tune do)."""
        last = max(i for i, m in enumerate(day.messages) if m.role == "assistant")
        answers = [m.model_dump(exclude_none=True) for m in day.messages[last + 1 :]]
        lead = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]
        turns = self.tokenizer.apply_chat_template(lead, tokenize=False).count(self.end)  # the lead's two turns
        after = self.tokenizer.apply_chat_template([*lead, *answers], tokenize=False, add_generation_prompt=True)
        pieces = after.split(self.end, turns)  # a template may render the lead's reply otherwise: count turns
        if turns < 2 or len(pieces) <= turns:
            raise TradeError(
                "the model's chat template does not end each turn with its end-of-turn token",
                hint=f"use a template that closes every message with {self.end}",
            )
        return self.tokenizer.encode(pieces[-1], add_special_tokens=False)


def _generator(seed: int, row: int) -> Any:
    import torch

    return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{row}".encode()))


def advantages(rewards: list[float]) -> list[float]:
    """Each reward less the group's mean, over the group's standard deviation (0 for a group that agrees)."""
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / max(1, len(rewards) - 1)) ** 0.5
    return [(r - mean) / (std + 1e-4) for r in rewards]


def group_loss(
    model: Any, rows: list[Row], weights: list[float], temperature: float, tokens: int, precision: str = "float32"
) -> Any:
    """The group's share of the step's loss: minus the advantage-weighted log-likelihood of the tokens each row
    wrote, over the step's ``tokens`` written (the group's shared first prompt read once)."""
    taken = [(row, weight) for row, weight in zip(rows, weights, strict=True) if row.written and weight]
    with autocast(precision):
        chosen = written_logprobs(model, [r.ids for r, _ in taken], [r.written for r, _ in taken], temperature)
    return -sum(weight * logprobs.sum() for (_, weight), logprobs in zip(taken, chosen, strict=True)) / tokens


def train(config: RunConfig) -> Path:
    """Run the GRPO steps; returns the folder of the trained model (``model/`` in the run folder)."""
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trade_reward.taskfolder import read_records
    from trade_train.pretrained.sft import freeze_below
    from trade_train.store import market_store

    grpo, run_dir = config.grpo, config.run_dir.resolve()
    if grpo.beta or grpo.lora_rank or config.device != "cpu":
        raise TradeError("prefix-grpo trains on cpu with beta=0 and no LoRA", hint="use trl-grpo for those")
    records = read_records(config.tasks, "train")
    if not records:
        raise TradeError(f"tasks folder {config.tasks} has no train task", hint="rebuild it with `trade data tasks`")
    store = market_store(config.data)
    settings = EpisodeSettings(max_turns=grpo.max_turns)
    torch.manual_seed(grpo.seed)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    model = grouped_attention(AutoModelForCausalLM.from_pretrained(config.model, dtype=torch.float32))
    freeze_below(model, grpo.train_layers)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=grpo.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _rate(grpo))
    player = GroupPlayer(model, tokenizer, model_format(Path(config.model)).tool_calls, grpo, PromptCache(model))
    tasks_per_step = grpo.batch_size // grpo.num_generations
    order, draw = [], random.Random(grpo.seed)
    started = time.perf_counter()
    for step in range(1, grpo.steps + 1):
        began = time.perf_counter()
        while len(order) < tasks_per_step:  # every task once before any twice, as TRL's sampler does
            order += draw.sample(records, len(records))
        chosen, order = order[:tasks_per_step], order[tasks_per_step:]
        model.eval()
        player.cache = PromptCache(model)  # the weights moved: what was read before is stale
        played = player.play(
            [
                (
                    [Episode.start(record.task, store, settings=settings) for _ in range(grpo.num_generations)],
                    record.prompt,
                    zlib.crc32(f"{grpo.seed}/{step}/{number}".encode()),
                )
                for number, record in enumerate(chosen)
            ]
        )
        groups = []
        for number, (record, rows) in enumerate(zip(chosen, played, strict=True)):
            truth = record.ground_truth.model_dump_json()
            groups.append((rows, [_rollout(row, truth, config.reward, f"{step}/{number}") for row in rows]))
        rollout_seconds = time.perf_counter() - began
        tokens = sum(len(row.written) for rows, _ in groups for row in rows) or 1
        optimizer.zero_grad(set_to_none=True)
        loss = 0.0
        for rows, rollouts in groups:
            weights = advantages([r.score for r in rollouts])
            if any(w and row.written for w, row in zip(weights, rows, strict=True)):
                part = group_loss(model, rows, weights, grpo.temperature, tokens, grpo.precision)
                part.backward()
                loss += part.item()
        norm = float(torch.nn.utils.clip_grad_norm_(trained, 1.0))
        rate = schedule.get_last_lr()[0]  # this step's
        optimizer.step()
        schedule.step()
        figures = {
            f"{SOURCE}/loss": loss,
            f"{SOURCE}/grad_norm": norm,
            f"{SOURCE}/learning_rate": rate,
            f"{SOURCE}/rollout_seconds": rollout_seconds,
            f"{SOURCE}/step_seconds": time.perf_counter() - began,
            f"{SOURCE}/prompt_tokens_read": float(player.cache.read_tokens),
            f"{SOURCE}/prompt_tokens_cached": float(player.cache.given_tokens),
        }
        rollouts = [rollout for _, batch in groups for rollout in batch]
        append_metrics(run_dir, record_step(run_dir, SOURCE, step, rollouts, store, config.model, figures))
    out = run_dir / "model"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    log.info("prefix_grpo.done", steps=grpo.steps, seconds=round(time.perf_counter() - started, 1), model=str(out))
    return out


def _rate(grpo: GRPOSettings) -> Any:
    """The learning rate's factor at each step, as TRL's schedulers move it (no warm-up)."""
    import math

    steps = grpo.steps
    if grpo.lr_scheduler == "constant":
        return lambda step: 1.0
    if grpo.lr_scheduler == "linear":
        return lambda step: max(0.0, 1 - step / steps)
    return lambda step: 0.5 * (1 + math.cos(math.pi * step / steps))


def _rollout(row: Row, ground_truth: str, scheme: str, group: str) -> Rollout:
    """The played day scored by ``scheme`` as verl and trl-grpo score it."""
    episode = row.day.episode
    reward = score_day(
        episode.model_dump_json(), ground_truth, scheme=scheme, source=f"trade-agent/{episode.task.universe}"
    )
    return Rollout(
        group=group,
        episode=episode,
        reward=reward,
        conversation=row.day.messages,
        ground_truth=parse(GroundTruth, ground_truth),
    )


def main(argv: list[str] | None = None) -> None:
    path = Path((argv if argv is not None else sys.argv[1:] or [CONFIG])[0])
    train(RunConfig.model_validate_json(path.read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
