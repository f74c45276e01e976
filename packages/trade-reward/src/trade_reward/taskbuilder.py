"""``trade data tasks``: sample every embargoed T0 of each time split and write a tasks folder.

Tasks are drawn by trade-tools' one sampler (:mod:`trade_tools.sampler`, seeded by (seed, T0, k), so a day's
tasks do not change when the split ranges around it do); each gets its ground truth from the market data and
the prompts :meth:`Episode.messages` renders point in time. The forward returns go into the record's
``ground_truth`` only. The folder's format is :mod:`trade_reward.taskfolder`; splits are :mod:`trade_reward.splits`.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from pathlib import Path

import structlog
from pydantic import BaseModel
from tqdm import tqdm

from trade_core.errors import TradeError
from trade_data.store import MarketStore
from trade_reward.forward import ground_truth
from trade_reward.splits import Split, days_per_split, parse_pool_size, parse_splits
from trade_reward.taskfolder import Manifest, SamplerSettings, SplitSummary, TaskRecord, check_out, write_folder
from trade_tools.episode import Episode
from trade_tools.rules import ExecutionRules
from trade_tools.sampler import draw_task, task_rng

log = structlog.get_logger("trade.tasks")


class BuildSummary(BaseModel):
    """What ``build_tasks`` wrote, for the CLI."""

    out: str
    manifest: Manifest
    seconds: float

    def to_text(self) -> str:
        m = self.manifest
        low, high = m.sampler.pool_size
        lines = [
            f"tasks       {self.out}  [{m.describe()}; dataset {m.dataset}]",
            f"sampler     {m.universe}, pool {low}-{high}, {m.sampler.per_day} per day, seed {m.seed}, "
            f"T+{m.sampler.horizon} embargo",
        ]
        for s in m.splits:
            lines.append(f"{s.name:<11} {s.tasks} tasks on {s.days} days, T0 {s.first_t0} .. {s.last_t0}")
        lines.append(f"built in    {self.seconds:.1f} s")
        return "\n".join(lines)


def _check_universe(store: MarketStore, universe: str, pool_size: tuple[int, int]) -> None:
    if universe not in store.universe_names:
        raise TradeError(f"unknown universe '{universe}'", hint=f"known: {', '.join(store.universe_names)}")
    size = int(store.membership(universe).sum(axis=1).max())
    if pool_size[1] > size:
        raise TradeError(
            f"--pool-size {pool_size[0]}-{pool_size[1]} exceeds {universe}'s size",
            hint=f"at most {size}, its most members on one day",
        )


def _sample_split(
    store: MarketStore,
    split: Split,
    days: list[dt.date],
    sampler: SamplerSettings,
    seed: int,
    universe: str,
    look: dict[str, object],
    bar: tqdm,
) -> list[TaskRecord]:
    """The split's tasks, each with ``look`` (anonymized, tools, prompt set) and the prompt it renders."""
    records: list[TaskRecord] = []
    for day in days:
        view = store.asof(day)
        for k in range(sampler.per_day):
            task = draw_task(view, f"{split.name}-{day}-{k}", task_rng(seed, day, k), universe, sampler.pool_size)
            if task is not None:
                task = task.model_copy(update=look)
                records.append(
                    TaskRecord(
                        index=len(records),
                        split=split.name,
                        task=task,
                        ground_truth=ground_truth(store, task.date, task.pool),
                        prompt=Episode.start(task, store).messages(),
                    )
                )
            bar.update()
    return records


def _split_summary(split: Split, days: list[dt.date], records: list[TaskRecord]) -> SplitSummary:
    if not records:
        raise TradeError(f"split {split.name} has no task: no universe stock traded on its days")
    return SplitSummary(
        name=split.name,
        start=split.start,
        end=split.end,
        days=len(days),
        tasks=len(records),
        first_t0=records[0].task.date,
        last_t0=records[-1].task.date,
    )


def build_tasks(
    data: Path | str,
    out: Path | str,
    *,
    split: str,
    universe: str = "csi300",
    pool_size: str = "10-30",
    per_day: int = 1,
    seed: int = 0,
    anonymize: bool = False,
    anonymize_noise: float | None = None,
    tools: Sequence[str] | None = None,
    prompt_set: str | None = None,
    progress: bool = False,
) -> BuildSummary:
    """Sample ``per_day`` tasks for every embargoed T0 of each split and write OUT atomically.

    ``anonymize``: every task is flagged (``Task.anonymized``), so its prompt and every episode opened from
    it (training, ``trade eval tasks``) show aliases for symbols and dates (:mod:`trade_tools.anonymize`),
    its bars perturbed by ``anonymize_noise`` where set (``Task.anonymize_noise``).
    ``tools`` and ``prompt_set``: every episode of the tasks offers these tools and words its prompt so (the
    Episode's defaults where None), whoever opens it.
    """
    began = time.perf_counter()
    splits, pool = parse_splits(split), parse_pool_size(pool_size)
    if per_day < 1:
        raise TradeError(f"--per-day {per_day}: want at least 1")
    if seed < 0:
        raise TradeError(f"--seed {seed}: want 0 or more")
    out = Path(out)
    check_out(out)
    store = MarketStore.load(data)
    _check_universe(store, universe, pool)
    rules = ExecutionRules()
    sampler = SamplerSettings(
        pool_size=pool, per_day=per_day, lot_size=rules.lot_size, star_min_shares=rules.star_min_shares
    )
    days = days_per_split(store, splits)
    look = {
        "anonymized": anonymize,
        "anonymize_noise": anonymize_noise,
        "tools": None if tools is None else list(tools),
        "prompt_set": prompt_set,
    }
    records, summaries = {}, []
    with tqdm(total=sum(map(len, days.values())) * per_day, desc="tasks", unit="task", disable=not progress) as bar:
        for s in splits:
            records[s.name] = _sample_split(store, s, days[s], sampler, seed, universe, look, bar)
            summaries.append(_split_summary(s, days[s], records[s.name]))
    manifest = Manifest(
        dataset=os.path.relpath(Path(data).resolve(), out.resolve()),
        synthetic=store.meta.synthetic,
        dataset_source=store.meta.source,
        universe=universe,
        seed=seed,
        sampler=sampler,
        splits=summaries,
        anonymized=anonymize,
        tools=look["tools"],
        prompt_set=prompt_set,
    )
    write_folder(out, manifest, records)
    seconds = time.perf_counter() - began
    log.info("tasks.done", out=str(out), tasks=sum(s.tasks for s in summaries), seconds=round(seconds, 2))
    return BuildSummary(out=str(out), manifest=manifest, seconds=seconds)
