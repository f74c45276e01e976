"""The multi-day backtest: one portfolio carried from close to close, a fresh Episode each day, any policy.

Conventions (the README states them too):

- The NAV base is the close of the trading day before the first day, NAV = initial cash; day k's NAV is at
  its close after its trades.
- Each day is a fresh conversation: a :class:`~trade_tools.records.Task` with the carried shares (all
  sellable: T+1 resets each morning), their average cost and the cash. Corporate actions between two closes
  are settled in cash at the ex-date close: ``cash += shares x raw close x (factor_today / factor_before - 1)``,
  so dividends and bonus shares keep the total return the adjusted prices (and the reward) see; the cost basis
  moves to the ex-date's price basis (``cost / (factor_today / factor_before)``), the one the tools' prices use.
- The pool is drawn once (seeded) from the universe's members trading on the first day, or read from a
  file; each day it is those still members (a file's stocks: still listed) and trading that day, and held
  stocks can always be traded (``Episode.in_pool``).
- Each day's trajectory carries the day's ground truth (the forward prices of its pool and holdings over the
  reward's horizon, :func:`trade_reward.forward.ground_truth`) when the data holds those days, so it can be scored
  like a single-day task (``trade distill filter``'s nav-return rule); it is written after the day is played and
  never reaches the policy.
- Fills stand on every day the policy played, however its day ended (stopped, truncated, no tool call, left
  open: then ended as failed). A day the policy could not play (:class:`~trade_eval.policy.PolicyUnavailable`,
  or a policy that raised) is ``failed``: the morning's portfolio is held, its reason recorded.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from trade_core.errors import TradeError
from trade_core.files import append_line
from trade_core.plugins import TradePluginManager, get_manager
from trade_core.runs import running
from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_eval.metrics import Conventions, activity, attribution, performance, seed_spread
from trade_eval.policies.baselines import BASELINES
from trade_eval.policy import Policy, RunSettings
from trade_eval.run import manifest_fields, play_day
from trade_eval.uncertainty import Bootstrap, intervals
from trade_records.runfolder import (
    DAYS,
    MANIFEST,
    SEEDS,
    SUMMARY,
    TRAJECTORIES,
    BacktestSummary,
    DayRecord,
    Manifest,
    PoolSpec,
    open_run,
    write_json,
    writer_lock,
)
from trade_reward.forward import HORIZON, ground_truth
from trade_tools.day import TradingDay
from trade_tools.episode import MAX_TURNS, Episode, EpisodeSettings
from trade_tools.grading import GroundTruth
from trade_tools.records import Task
from trade_tools.rules import ExecutionRules
from trade_tools.sampler import draw_pool, task_rng
from trade_tools.trajectory import Trajectory

log = structlog.get_logger("trade.eval")

INDEX = "SH000300"
INDEX_ROW = "CSI300"
COMPARED = ("hold", "equal-weight", "momentum")
"""The baselines every run's summary shows beside its policy."""
ORACLE = "oracle-signal"
"""Shown too where the dataset has a planted signal: the ceiling it allows."""


@dataclass
class Account:
    """The portfolio carried from one close to the next."""

    cash: float
    holdings: dict[str, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)

    @classmethod
    def after(cls, record: DayRecord) -> Account:
        return cls(record.cash, dict(record.holdings), dict(record.cost))


class Backtest:
    """The days, the pool and the rules of one run on one dataset; plays any policy over them."""

    def __init__(
        self,
        store: MarketStore,
        start: dt.date,
        num_days: int,
        *,
        initial_cash: float = 1_000_000.0,
        pool_size: int = 20,
        pool: list[str] | None = None,
        universe: str = "csi300",
        seed: int = 0,
        max_turns: int = MAX_TURNS,
        rules: ExecutionRules | None = None,
        anonymize: bool = False,
        anonymize_noise: float | None = None,
        tools: tuple[str, ...] | None = None,
        prompt_set: str | None = None,
        manager: TradePluginManager | None = None,
    ) -> None:
        """``pool``: the run's stocks (else ``pool_size`` drawn with ``seed`` on the first day); ``anonymize``:
        each day's Task is anonymized (:mod:`trade_tools.anonymize`), its aliases drawn afresh every day, its bars
        perturbed by ``anonymize_noise`` (``Task.anonymize_noise``); ``tools`` and ``prompt_set``: what every day
        offers and how it is worded (default: the four tools, the tutorial's prompt); ``manager``: the plugins each
        day's Episode and the run's end are played with (default: the process-wide ones)."""
        self.store = store
        self.manager = manager or get_manager()
        self.start = start
        self.dates = plan_dates(store, start, num_days)
        self.base_date = store.shift(self.dates[0], -1)
        self.initial_cash = initial_cash
        self.universe = universe
        self.seed = seed
        self.rules = rules or ExecutionRules()
        chosen = {"tools": tools, "prompt_set": prompt_set}
        self.settings = EpisodeSettings(max_turns=max_turns, **{k: v for k, v in chosen.items() if v is not None})
        self.anonymize = anonymize
        self.anonymize_noise = anonymize_noise
        first = store.asof(self.dates[0])
        first.members(universe)  # refuses an unknown universe
        self.from_file = pool is not None
        if pool is None:
            pool = draw_pool(first, universe, (pool_size, pool_size), task_rng(seed, first.date))
            if not pool:
                raise TradeError(f"no {universe} stock traded on {first.date}", hint="choose another --universe")
        wrong = [s for s in pool if not first.knows(s) or board_of(s) is Board.INDEX]
        if wrong:
            raise TradeError(
                f"{len(wrong)} pool symbols are not stocks listed by {first.date}: {', '.join(wrong[:5])}",
                hint="a pool file lists stock symbols like SH600519, comma- or line-separated",
            )
        self.pool = sorted(set(pool))

    def day_pool(self, index: int) -> list[str]:
        """The day's pool: the run's stocks still members (a file's: listed) and trading; if none trades,
        every one of them (so the day can still be played, with nothing to buy)."""
        view = self.store.asof(self.dates[index])
        members = set(view.symbols() if self.from_file else view.members(self.universe))
        today = [s for s in self.pool if s in members and not view.is_suspended(s)]
        return today or self.pool

    def ex_rights(self, account: Account, index: int) -> dict[str, float]:
        """``factor today / factor at the previous close`` of each held stock with a corporate action since then.

        Dividends and bonus shares raise the backward-adjustment factor; a factor that falls is a data
        correction, not something a holder pays, and settles nothing (it could take the cash below zero).
        """
        before = self.store.asof(self.dates[index - 1] if index else self.base_date)
        view = self.store.asof(self.dates[index])
        ratios = {symbol: view.factor(symbol) / before.factor(symbol) for symbol in account.holdings}
        return {symbol: ratio for symbol, ratio in ratios.items() if ratio > 1}

    def open_day(self, policy: Policy, account: Account, index: int) -> tuple[TradingDay, float]:
        """The day's Episode on ``account`` after the corporate actions at its close: cash for them, and each cost
        basis moved to the day's price basis (divided by the ratio), as the prices the tools show are; kept raw,
        the cost read the dividend as a loss beside them."""
        date = self.dates[index]
        view, rights = self.store.asof(date), self.ex_rights(account, index)
        dividends = sum((round(account.holdings[s] * view.last_close(s) * (r - 1), 2) for s, r in rights.items()), 0.0)
        cost = {symbol: price / rights.get(symbol, 1.0) for symbol, price in account.cost.items()}
        task = Task(
            task_id=f"backtest-{date}",
            date=date,
            pool=self.day_pool(index),
            holdings=account.holdings,
            cost_basis=cost,
            cash=account.cash + dividends,
            universe=self.universe,
            anonymized=self.anonymize,
            anonymize_noise=self.anonymize_noise,
        )
        episode = Episode.start(task, self.store, rules=self.rules, settings=self.settings, manager=self.manager)
        return TradingDay(episode, None if policy.reads_prompt else []), dividends

    def truth(self, task: Task) -> GroundTruth | None:
        """The forward prices of every stock the day can end holding, or None where the data ends before the
        reward's horizon (the last days of the calendar)."""
        if self.store.day_index(task.date) + HORIZON >= len(self.store.calendar):
            return None
        return ground_truth(self.store, task.date, [*task.pool, *task.holdings])

    async def play(
        self, policy: Policy, settings: RunSettings, account: Account, index: int
    ) -> tuple[DayRecord, Trajectory]:
        """Play day ``index`` from ``account`` (the previous close): its record and trajectory."""
        day, dividends = self.open_day(policy, account, index)
        episode = day.episode
        usage, failure = await play_day(policy, day, settings, "backtest.policy_error", date=str(episode.task.date))
        trajectory = day.to_trajectory("backtest", model=settings.model, ground_truth=self.truth(episode.task))
        fills = [] if failure else [a.fill for a in episode.actions if a.fill is not None]
        orders = [a for a in episode.actions if a.type != "stop"]
        held = [(s, p) for s, p in sorted(episode.positions.items()) if p.shares]
        record = DayRecord(
            date=episode.task.date,
            index=index,
            status="failed" if failure else "done",
            episode_status=episode.status,  # type: ignore[arg-type]
            reason=failure or ("" if episode.status == "stopped" else episode.status_reason),
            nav=episode.value_before if failure else episode.value(),
            cash=episode.task.cash if failure else episode.cash,
            holdings=account.holdings if failure else {s: p.shares for s, p in held},
            cost=episode.task.cost_basis if failure else {s: p.cost for s, p in held},
            value_before=episode.value_before,
            dividends=dividends,
            fees=sum(f.fees for f in fills),
            costs=sum(f.costs for f in fills),
            turnover=sum(f.gross for f in fills) / episode.value_before if episode.value_before else 0.0,
            orders=len(orders),
            refused=sum(not a.accepted for a in orders),
            trajectory_id=trajectory.id,
            **usage.model_dump(),
        )
        return record, trajectory

    async def days(
        self, policy: Policy, settings: RunSettings, done: list[DayRecord] | None = None
    ) -> AsyncIterator[tuple[DayRecord, Trajectory]]:
        """Play every day after ``done`` (the records of days already played), one after the other."""
        done = done or []
        account = Account.after(done[-1]) if done else Account(self.initial_cash)
        for index in range(len(done), len(self.dates)):
            record, trajectory = await self.play(policy, settings, account, index)
            account = Account.after(record)
            yield record, trajectory

    def simulate(self, policy: Policy, settings: RunSettings) -> list[DayRecord]:
        """Every day's record, in memory (the baselines beside a run)."""

        async def collect() -> list[DayRecord]:
            return [record async for record, _ in self.days(policy, settings)]

        return asyncio.run(collect())

    def index_nav(self) -> list[float]:
        """The CSI300 from the base close, scaled to the initial cash."""
        closes = [self.store.asof(d).last_close(INDEX) for d in [self.base_date, *self.dates]]
        return [self.initial_cash * close / closes[0] for close in closes]

    def describe_start(self) -> str:
        return (
            f"NAV = {self.initial_cash:,.0f} CNY at the close of {self.base_date} (the trading day before "
            f"{self.dates[0]}); each day's NAV at its close after its trades, dividends settled in cash"
        )


def plan_dates(store: MarketStore, start: dt.date, num_days: int) -> list[dt.date]:
    """``num_days`` trading days from the first one on or after ``start`` (one-line errors for the rest)."""
    calendar = store.calendar
    first, last = calendar[0].date(), calendar[-1].date()
    begin = int(calendar.searchsorted(str(start)))
    if begin == 0 or begin >= len(calendar):
        raise TradeError(
            f"--start-date {start} is outside the data ({first} .. {last})",
            hint=f"the first day needs a close before it: start after {first}",
        )
    end = begin + num_days
    if end > len(calendar):
        raise TradeError(
            f"--num-days {num_days} from {calendar[begin].date()} runs past the data's last day {last}",
            hint=f"at most {len(calendar) - begin} trading days from there",
        )
    return [d.date() for d in calendar[begin:end]]


def compare(
    backtest: Backtest, policy: Policy, settings: RunSettings, records: list[DayRecord], conventions: Conventions
) -> BacktestSummary:
    """summary.json: the policy's metrics beside hold, equal-weight, momentum and the CSI300 on the same days
    (the baselines are played here: milliseconds a day)."""
    baselines = {cls.name: cls for cls in BASELINES}
    runs = {policy.name: records}
    planted = backtest.store.planted_signal
    for name in (*COMPARED, ORACLE) if planted else COMPARED:
        if name not in runs:
            options = {"signal": planted} if name == ORACLE else {}
            runs[name] = backtest.simulate(baselines[name](), RunSettings(seed=settings.seed, options=options))
    dates = [str(d) for d in [backtest.base_date, *backtest.dates]]
    navs = {name: [backtest.initial_cash, *(r.nav for r in days)] for name, days in runs.items()}
    navs[INDEX_ROW] = backtest.index_nav()
    benchmarks = {"vs_index": navs[INDEX_ROW], "vs_hold": navs["hold"]}
    bootstrap = Bootstrap()
    rows = {}
    for name, nav in navs.items():
        rows[name] = performance(nav, dates, conventions, benchmarks)
        rows[name].update(attribution(nav, navs[INDEX_ROW], navs["equal-weight"], conventions))
        rows[name].update(intervals(nav, conventions, benchmarks, bootstrap))
        if name in runs:
            rows[name].update(activity([r.model_dump() for r in runs[name]]))
    return BacktestSummary(
        conventions={**conventions.to_json(backtest.describe_start()), "ci": bootstrap.describe(len(dates) - 1)},
        rows=rows,
        nav={"dates": dates, **navs},
    )


def run_backtest(
    backtest: Backtest,
    policy: Policy,
    settings: RunSettings,
    out: Path,
    manifest: Manifest,
    *,
    resume: bool = False,
    conventions: Conventions | None = None,
    progress: bool = True,
) -> BacktestSummary:
    """Play the run into ``out`` (or continue it with ``resume``) and write summary.json; returns it."""
    out = Path(out)
    with running("backtest", out, backtest.manager):
        with writer_lock(out):
            records = open_run(out, manifest, resume=resume)
            log.info("backtest.start", out=str(out), policy=policy.name, days=len(manifest.dates), done=len(records))
            play_into(backtest, policy, settings, out, records, progress=progress)
            summary = compare(backtest, policy, settings, records, conventions or Conventions())
            write_json(out / SUMMARY, summary)
        failed = sum(r.status == "failed" for r in records)
        log.info("backtest.done", out=str(out), days=len(records), failed=failed, nav=records[-1].nav)
    return summary


def run_seeds(
    backtest: Backtest,
    policy: Policy,
    settings: RunSettings,
    out: Path,
    manifest: Manifest,
    seeds: int,
    *,
    resume: bool = False,
    conventions: Conventions | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Play the run once per seed ``settings.seed``, +1, ... into ``out/seed-<s>`` (each resumable like one
    run) and write ``out/seeds.json`` (:func:`~trade_eval.metrics.seed_spread`); returns it. The seed moves
    the model's sampling and the random policy's draws only: the pool stays the one ``backtest`` drew, so
    the runs differ by the policy's randomness alone."""
    out = Path(out)
    if (out / MANIFEST).exists():
        raise TradeError(f"{out} holds a single run, not the runs of --seeds", hint="choose another --out")
    summaries = {}
    for seed in range(settings.seed, settings.seed + seeds):
        folder = out / f"seed-{seed}"
        sampling = manifest.sampling.model_copy(update={"seed": seed})
        summaries[seed] = run_backtest(
            backtest,
            policy,
            settings.model_copy(update={"seed": seed}),
            folder,
            manifest.model_copy(update={"sampling": sampling}),
            resume=resume and (folder / MANIFEST).exists(),
            conventions=conventions,
            progress=progress,
        )
    spread = seed_spread(summaries)
    write_json(out / SEEDS, spread)
    return spread


def play_into(
    backtest: Backtest,
    policy: Policy,
    settings: RunSettings,
    out: Path,
    records: list[DayRecord],
    *,
    progress: bool = True,
) -> None:
    """Play the days after ``records`` (appended to it), each day's trajectory and record appended to ``out``."""
    from tqdm import tqdm

    quiet = None if progress else True  # None: a bar on a terminal only
    bar = tqdm(total=len(backtest.dates), initial=len(records), desc=policy.name, unit="day", disable=quiet)

    async def play() -> None:
        async for record, trajectory in backtest.days(policy, settings, list(records)):
            append_line(out / TRAJECTORIES, trajectory.model_dump_json())
            append_line(out / DAYS, record.model_dump_json())
            records.append(record)
            bar.set_postfix_str(f"{record.date} NAV {record.nav:,.0f}")
            bar.update()
            event = log.warning if record.status == "failed" else log.debug
            event("backtest.day", date=str(record.date), status=record.status, reason=record.reason, nav=record.nav)

    with bar:
        asyncio.run(play())


def new_manifest(
    backtest: Backtest,
    policy_name: str,
    settings: RunSettings,
    *,
    command: list[str],
    data: Path,
    pool_file: Path | None,
    pool_size: int | None,
    policy_dist: str = "trade-eval",
) -> Manifest:
    """The manifest of a run of ``backtest`` with ``policy_name`` and ``settings``."""
    return Manifest(
        **manifest_fields(
            policy_name, settings, command=command, data=data, store=backtest.store, policy_dist=policy_dist
        ),
        base_url=settings.base_url,
        start_date=backtest.start,
        num_days=len(backtest.dates),
        dates=backtest.dates,
        initial_cash=backtest.initial_cash,
        pool=PoolSpec(
            size=None if pool_file else pool_size,
            file=str(pool_file) if pool_file else None,
            universe=backtest.universe,
            seed=backtest.seed,
            symbols=backtest.pool,
        ),
        max_turns=backtest.settings.max_turns,
        anonymized=backtest.anonymize,
        rules=backtest.rules,
    )
