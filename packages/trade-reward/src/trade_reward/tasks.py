"""The daily task builder behind ``trade data tasks``: verl parquet rows and JSONL tasks per time split.

One sample is one trading day T0 and one seeded draw: a pool of universe members that traded at T0,
a starting portfolio of pool stocks bought at the previous close, cash, and the prompts the Episode
renders for that day. Prompts come from :meth:`Episode.messages`, which reads point in time; the
forward returns go into ``reward_model.ground_truth`` only.

Starting portfolio (documented so rewards can be read against it): capital 1,000,000 CNY; 0..5
holdings (uniform, at most the pool size) of stocks that traded before T0; each takes a uniform
5-20% of the capital in whole lots at the previous close (at least one minimum order, STAR 200
shares, if that costs at most 20%; otherwise not held); cash is the rest, so it is never negative.

Splits are by time with an embargo: a T0 belongs to a split only if its T+3 also lies inside it,
so no forward window crosses into the next split. Draws are seeded by (seed, T0, k), so a day's
tasks do not change when the split ranges around it do.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import shutil
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pydantic import BaseModel, ValidationError
from tqdm import tqdm

from trade_core.errors import TradeError
from trade_core.params import iso_date
from trade_data.qlib_dir import swap_into_place
from trade_data.store import MarketStore, PointInTimeView
from trade_data.symbols import Board, board_of
from trade_reward.forward import HORIZON, GroundTruth, ground_truth
from trade_tools.episode import Episode, Task
from trade_tools.rules import ExecutionRules

log = structlog.get_logger("trade.tasks")

CAPITAL = 1_000_000.0
MAX_HOLDINGS = 5
WEIGHT_RANGE = (0.05, 0.20)
"""Share of the capital per holding; MAX_HOLDINGS x the upper bound <= 1 keeps cash >= 0."""
AGENT_NAME = "trading_agent"
ABILITY = "trading"
MANIFEST = "manifest.json"
FORMAT_VERSION = 1
_SPLIT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_ROW_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("agent_name", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct([("index", pa.int64()), ("split", pa.string()), ("task_id", pa.string()), ("task", pa.string())]),
        ),
    ]
)
"""Fixed row types: verl reads every file alike, and an empty pool or holdings never changes a type."""


@dataclass(frozen=True)
class Split:
    """A named, inclusive date range."""

    name: str
    start: dt.date
    end: dt.date


class SplitSummary(BaseModel):
    """What one split file holds."""

    name: str
    start: dt.date
    end: dt.date
    days: int
    tasks: int
    first_t0: dt.date
    last_t0: dt.date


class SamplerSettings(BaseModel):
    """The sampler's settings, recorded so a tasks folder says how it was drawn."""

    pool_size: tuple[int, int]
    per_day: int
    capital: float = CAPITAL
    max_holdings: int = MAX_HOLDINGS
    holding_weight: tuple[float, float] = WEIGHT_RANGE
    lot_size: int
    star_min_shares: int
    cost_basis: str = "previous close (raw close of the last traded day before T0)"
    horizon: int = HORIZON


class Manifest(BaseModel):
    """``manifest.json``: where the tasks came from and what each split holds."""

    format_version: int = FORMAT_VERSION
    dataset: str
    synthetic: bool
    dataset_source: str
    universe: str
    seed: int
    sampler: SamplerSettings
    splits: list[SplitSummary]


class BuildSummary(BaseModel):
    """What ``build_tasks`` wrote, for the CLI."""

    out: str
    manifest: Manifest
    seconds: float

    def to_text(self) -> str:
        m = self.manifest
        kind = "SYNTHETIC market (not real data)" if m.synthetic else "real market data"
        low, high = m.sampler.pool_size
        lines = [
            f"tasks       {self.out}  [{kind}; dataset {m.dataset}]",
            f"sampler     {m.universe}, pool {low}-{high}, {m.sampler.per_day} per day, seed {m.seed}, "
            f"T+{m.sampler.horizon} embargo",
        ]
        for s in m.splits:
            lines.append(f"{s.name:<11} {s.tasks} tasks on {s.days} days, T0 {s.first_t0} .. {s.last_t0}")
        lines.append(f"built in    {self.seconds:.1f} s")
        return "\n".join(lines)


# -- parsing ---------------------------------------------------------------------------------


def parse_splits(text: str) -> list[Split]:
    """'train=2018-01-01:2023-12-31,val=...' -> splits sorted by start; overlaps are refused."""
    splits = [_parse_split(part.strip()) for part in text.split(",") if part.strip()]
    if not splits:
        raise TradeError("--split is empty", hint="e.g. train=2018-01-01:2023-12-31,val=2024-01-01:2024-12-31")
    names = [s.name for s in splits]
    if len(set(names)) != len(names):
        raise TradeError(f"--split names a split twice: {', '.join(names)}")
    splits.sort(key=lambda s: s.start)
    for before, after in itertools.pairwise(splits):
        if after.start <= before.end:
            raise TradeError(f"--split: {before.name} ({before.start}..{before.end}) overlaps {after.name}")
    return splits


def _parse_split(part: str) -> Split:
    name, _, dates = part.partition("=")
    start, _, end = dates.partition(":")
    hint = "use NAME=YYYY-MM-DD:YYYY-MM-DD, comma separated"
    if not _SPLIT_NAME.match(name.strip()):
        raise TradeError(f"--split: {part!r} has no valid name (letters, digits, - and _)", hint=hint)
    try:
        first, last = iso_date(start.strip()), iso_date(end.strip())
    except ValueError:
        raise TradeError(f"--split: {part!r} is not NAME=START:END with dates", hint=hint) from None
    if last < first:
        raise TradeError(f"--split: {part!r} ends before it starts", hint=hint)
    return Split(name.strip(), first, last)


def parse_pool_size(text: str) -> tuple[int, int]:
    """'20' -> (20, 20); '10-30' -> (10, 30)."""
    low, sep, high = text.strip().partition("-")
    if not low.isdigit() or (sep and not high.isdigit()):
        raise TradeError(f"--pool-size {text!r} is not N or MIN-MAX", hint="e.g. 20 or 10-30")
    bounds = (int(low), int(high) if sep else int(low))
    if bounds[0] < 1 or bounds[1] < bounds[0]:
        raise TradeError(f"--pool-size {text!r}: want 1 <= MIN <= MAX")
    return bounds


def _check_universe(store: MarketStore, universe: str, pool_size: tuple[int, int]) -> None:
    if universe not in store.universe_names:
        raise TradeError(f"unknown universe '{universe}'", hint=f"known: {', '.join(store.universe_names)}")
    size = int(store.membership(universe).sum(axis=1).max())
    if pool_size[1] > size:
        raise TradeError(
            f"--pool-size {pool_size[0]}-{pool_size[1]} exceeds {universe}'s size",
            hint=f"at most {size}, its most members on one day",
        )


def _check_out(out: Path) -> None:
    """Refuse to replace anything but a tasks folder (or an empty one): OUT is swapped wholesale."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST).is_file())):
        raise TradeError(f"{out} exists and is not a tasks folder", hint="choose a new or empty folder for --out")


# -- sampling --------------------------------------------------------------------------------


def split_days(store: MarketStore, split: Split) -> list[dt.date]:
    """Trading days T0 of the split whose T+HORIZON is in the dataset and on or before the split's end."""
    calendar = store.calendar
    first = int(calendar.searchsorted(np.datetime64(split.start)))
    after_end = int(calendar.searchsorted(np.datetime64(split.end), side="right"))
    return [calendar[t].date() for t in range(first, after_end - HORIZON)]


def tradable(view: PointInTimeView, universe: str) -> list[str]:
    """Stocks in the universe at T0 that traded that day (a pool needs T0 prices)."""
    return [s for s in view.members(universe) if board_of(s) is not Board.INDEX and not view.is_suspended(s)]


def whole_lots(budget: float, price: float, symbol: str, rules: ExecutionRules) -> int:
    """Shares for ``budget`` in lots, at least one minimum order if that stays within the largest weight."""
    minimum = rules.star_min_shares if board_of(symbol) is Board.STAR else rules.lot_size
    shares = int(budget // (price * rules.lot_size)) * rules.lot_size
    if shares >= minimum:
        return shares
    return minimum if minimum * price <= WEIGHT_RANGE[1] * CAPITAL else 0


def draw_holdings(
    view: PointInTimeView, pool: list[str], rng: np.random.Generator, rules: ExecutionRules
) -> tuple[dict[str, int], dict[str, float]]:
    """(shares, cost basis) of 0..MAX_HOLDINGS pool stocks, each WEIGHT_RANGE of the capital."""
    prices = {s: p for s in pool if (p := view.previous_close(s)) is not None}
    count = int(rng.integers(0, min(MAX_HOLDINGS, len(prices)) + 1))
    chosen = sorted(rng.choice(sorted(prices), size=count, replace=False).tolist())
    weights = rng.uniform(*WEIGHT_RANGE, size=count)
    holdings, cost = {}, {}
    for symbol, weight in zip(chosen, weights, strict=True):
        shares = whole_lots(weight * CAPITAL, prices[symbol], symbol, rules)
        if shares:
            holdings[symbol], cost[symbol] = shares, prices[symbol]
    return holdings, cost


def draw_task(
    view: PointInTimeView, task_id: str, rng: np.random.Generator, universe: str, pool_size: tuple[int, int]
) -> Task | None:
    """One seeded sample for T0; None when no universe stock traded that day."""
    candidates = tradable(view, universe)
    if not candidates:
        return None
    size = min(int(rng.integers(pool_size[0], pool_size[1] + 1)), len(candidates))
    pool = sorted(rng.choice(candidates, size=size, replace=False).tolist())
    holdings, cost = draw_holdings(view, pool, rng, ExecutionRules())
    cash = round(CAPITAL - sum(shares * cost[s] for s, shares in holdings.items()), 2)
    return Task(
        task_id=task_id, date=view.date, pool=pool, holdings=holdings, cost_basis=cost, cash=cash, universe=universe
    )


# -- rows and files --------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """A task with its label and prompts: one parquet row and one JSONL line."""

    task: Task
    truth: GroundTruth
    messages: list[dict[str, str]]


def make_sample(store: MarketStore, task: Task) -> Sample:
    messages = Episode.start(task, store).messages()
    return Sample(task, ground_truth(store, task.date, task.pool), messages)


def verl_row(sample: Sample, index: int, split: str) -> dict[str, object]:
    """verl's dataset row; variable-key data (tasks, ground truth) as JSON strings."""
    return {
        "data_source": f"trade-agent/{sample.task.universe}",
        "agent_name": AGENT_NAME,
        "prompt": sample.messages,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": sample.truth.model_dump_json()},
        "extra_info": {
            "index": index,
            "split": split,
            "task_id": sample.task.task_id,
            "task": sample.task.model_dump_json(),
        },
    }


def jsonl_line(sample: Sample, index: int, split: str) -> str:
    """The task and its ground truth as one JSON object, for evaluation."""
    record = {
        "index": index,
        "split": split,
        "task": sample.task.model_dump(mode="json"),
        "ground_truth": sample.truth.model_dump(mode="json"),
    }
    return json.dumps(record, ensure_ascii=False)


def write_split(folder: Path, name: str, samples: list[Sample]) -> None:
    rows = [verl_row(sample, i, name) for i, sample in enumerate(samples)]
    pq.write_table(pa.Table.from_pylist(rows, schema=_ROW_SCHEMA), folder / f"{name}.parquet")
    lines = (jsonl_line(sample, i, name) + "\n" for i, sample in enumerate(samples))
    (folder / f"{name}.jsonl").write_text("".join(lines), encoding="utf-8")


def write_folder(out: Path, manifest: Manifest, samples: dict[str, list[Sample]]) -> None:
    """Write every file into a temporary sibling, then swap it into place: a failure leaves OUT as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        for name, split_samples in samples.items():
            write_split(staging, name, split_samples)
        (staging / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        swap_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# -- the builder -----------------------------------------------------------------------------


def _sample_split(
    store: MarketStore, split: Split, days: list[dt.date], sampler: SamplerSettings, seed: int, universe: str, bar: tqdm
) -> list[Sample]:
    samples = []
    for day in days:
        view = store.asof(day)
        for k in range(sampler.per_day):
            rng = np.random.default_rng([seed, day.toordinal(), k])
            task = draw_task(view, f"{split.name}-{day}-{k}", rng, universe, sampler.pool_size)
            if task is not None:
                samples.append(make_sample(store, task))
            bar.update()
    return samples


def _split_summary(split: Split, days: list[dt.date], samples: list[Sample]) -> SplitSummary:
    if not samples:
        raise TradeError(f"split {split.name} has no task: no universe stock traded on its days")
    return SplitSummary(
        name=split.name,
        start=split.start,
        end=split.end,
        days=len(days),
        tasks=len(samples),
        first_t0=samples[0].task.date,
        last_t0=samples[-1].task.date,
    )


def _days_per_split(store: MarketStore, splits: list[Split]) -> dict[Split, list[dt.date]]:
    found = {split: split_days(store, split) for split in splits}
    for split, days in found.items():
        if not days:
            first, last = store.calendar[0].date(), store.calendar[-1].date()
            raise TradeError(
                f"split {split.name} ({split.start}..{split.end}) has no trading day with its T+{HORIZON} inside it",
                hint=f"the dataset covers {first} .. {last}",
            )
    return found


def build_tasks(
    data: Path | str,
    out: Path | str,
    *,
    split: str,
    universe: str = "csi300",
    pool_size: str = "10-30",
    per_day: int = 1,
    seed: int = 0,
    progress: bool = False,
) -> BuildSummary:
    """Sample ``per_day`` tasks for every embargoed T0 of each split and write OUT atomically."""
    began = time.perf_counter()
    splits, pool = parse_splits(split), parse_pool_size(pool_size)
    if per_day < 1:
        raise TradeError(f"--per-day {per_day}: want at least 1")
    if seed < 0:
        raise TradeError(f"--seed {seed}: want 0 or more")
    out = Path(out)
    _check_out(out)
    store = MarketStore.load(data)
    _check_universe(store, universe, pool)
    rules = ExecutionRules()
    sampler = SamplerSettings(
        pool_size=pool, per_day=per_day, lot_size=rules.lot_size, star_min_shares=rules.star_min_shares
    )
    days = _days_per_split(store, splits)
    samples, summaries = {}, []
    with tqdm(total=sum(map(len, days.values())) * per_day, desc="tasks", unit="task", disable=not progress) as bar:
        for s in splits:
            samples[s.name] = _sample_split(store, s, days[s], sampler, seed, universe, bar)
            summaries.append(_split_summary(s, days[s], samples[s.name]))
    manifest = Manifest(
        dataset=str(data),
        synthetic=store.meta.synthetic,
        dataset_source=store.meta.source,
        universe=universe,
        seed=seed,
        sampler=sampler,
        splits=summaries,
    )
    write_folder(out, manifest, samples)
    seconds = time.perf_counter() - began
    log.info("tasks.done", out=str(out), tasks=sum(s.tasks for s in summaries), seconds=round(seconds, 2))
    return BuildSummary(out=str(out), manifest=manifest, seconds=seconds)


# -- statistics ------------------------------------------------------------------------------


def _spread(values: list[float], fmt: str) -> str:
    """min/median/max of ``values``, formatted."""
    low, mid, high = np.quantile(values, [0.0, 0.5, 1.0])
    return "/".join(format(v, fmt) for v in (low, mid, high))


class SplitStats(BaseModel):
    """Distributions over one split's tasks."""

    name: str
    tasks: int
    first_t0: dt.date
    last_t0: dt.date
    pool_sizes: list[int]
    holdings: dict[int, int]
    """number of holdings -> tasks"""
    cash_shares: list[float]
    """cash / starting capital at cost, per task"""

    def row(self) -> str:
        counts = " ".join(f"{n}:{c}" for n, c in sorted(self.holdings.items()))
        return (
            f"{self.name:<7} {self.tasks:>6}  {self.first_t0} .. {self.last_t0}  "
            f"{_spread(self.pool_sizes, '.0f'):<10}  {_spread(self.cash_shares, '.0%'):<13}  {counts}"
        )


class TaskStats(BaseModel):
    """``trade data tasks --stats``: what a tasks folder holds."""

    folder: str
    manifest: Manifest
    splits: list[SplitStats]

    def to_text(self) -> str:
        m = self.manifest
        kind = "SYNTHETIC market (not real data)" if m.synthetic else "real market data"
        low, high = m.sampler.pool_size
        return "\n".join(
            [
                f"tasks {self.folder}  [{kind}; dataset {m.dataset}, {m.universe}, seed {m.seed}, "
                f"pool {low}-{high}, {m.sampler.per_day} per day]",
                f"{'split':<7} {'tasks':>6}  {'T0 range':<24}  {'pool':<10}  {'cash share':<13}  holdings: tasks",
                *(s.row() for s in self.splits),
                "pool and cash share: min/median/max; cash share = cash / (cash + holdings at cost)",
            ]
        )


def _read_manifest(folder: Path) -> Manifest:
    path = folder / MANIFEST
    if not path.is_file():
        raise TradeError(f"{folder} is not a tasks folder (no {MANIFEST})", hint="build one with `trade data tasks`")
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise TradeError(f"{path} is not a tasks manifest ({error.error_count()} problems)") from None


def _read_tasks(path: Path) -> list[Task]:
    if not path.is_file():
        raise TradeError(f"{path} is missing", hint="rebuild the folder with `trade data tasks`")
    try:
        return [Task.model_validate(json.loads(line)["task"]) for line in path.read_text(encoding="utf-8").splitlines()]
    except (ValueError, KeyError, TypeError) as error:
        raise TradeError(f"{path} has a line that is not a task: {type(error).__name__}") from None


def _split_stats(name: str, tasks: list[Task]) -> SplitStats:
    if not tasks:
        raise TradeError(f"split {name} has no tasks")
    invested = [sum(n * t.cost_basis[s] for s, n in t.holdings.items()) for t in tasks]
    return SplitStats(
        name=name,
        tasks=len(tasks),
        first_t0=min(t.date for t in tasks),
        last_t0=max(t.date for t in tasks),
        pool_sizes=[len(t.pool) for t in tasks],
        holdings=dict(Counter(len(t.holdings) for t in tasks)),
        cash_shares=[t.cash / (t.cash + v) for t, v in zip(tasks, invested, strict=True)],
    )


def task_stats(folder: Path | str) -> TaskStats:
    """Counts, date ranges, pool sizes, holdings and cash shares of each split in a tasks folder."""
    folder = Path(folder)
    manifest = _read_manifest(folder)
    splits = [_split_stats(s.name, _read_tasks(folder / f"{s.name}.jsonl")) for s in manifest.splits]
    return TaskStats(folder=str(folder), manifest=manifest, splits=splits)
