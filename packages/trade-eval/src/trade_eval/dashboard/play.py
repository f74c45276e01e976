""" "Play a day" from the page: one trading day of a baseline or a served model, played by the backtest's own
code (:class:`~trade_eval.backtest.Backtest`, :func:`~trade_eval.backtest.run_backtest`) into a run folder
``plays/<date>-<policy>-<n>`` under ``--runs``, in a worker thread. While it plays, the page reads the day's
conversation as it grows from the live :class:`~trade_tools.day.TradingDay`."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from trade_core.errors import TradeError
from trade_eval.policy import POLICIES, DayUsage, Policy, RunSettings

if TYPE_CHECKING:
    from trade_data.store import MarketStore
from trade_tools.day import TradingDay

log = structlog.get_logger("trade.eval.dashboard")
PLAYS = "plays"


class Watched(Policy):
    """Plays as ``inner`` does, keeping the day it plays so the page can read it turn by turn."""

    name = "watched"
    description = "a policy whose day the dashboard watches"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  (the run's rows and records name the policy played)
        self.reads_prompt = inner.reads_prompt  # type: ignore[misc]
        self.day: TradingDay | None = None

    def check(self, settings: RunSettings) -> None:
        self.inner.check(settings)

    def for_data(self, settings: RunSettings, store: MarketStore) -> RunSettings:
        return self.inner.for_data(settings, store)

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        self.day = day
        return await self.inner.play(day, settings)


@dataclass
class Play:
    number: int
    name: str
    """The run folder's name under --runs."""
    date: dt.date
    policy: str
    watched: Watched
    state: str = "running"
    error: str = ""
    task: asyncio.Task[Any] | None = field(default=None, repr=False)

    def live(self) -> dict[str, Any]:
        """The day so far: its messages (as the page shows them) and whether it is over."""
        from trade_eval.report.page import message_view

        day = self.watched.day
        messages = list(day.messages) if day is not None else []
        return {
            "state": self.state,
            "error": self.error,
            "run": self.name,
            "messages": [message_view(m) for m in messages],
        }


class Plays:
    """The plays started from this dashboard, on the dataset ``--data`` (loaded on the first play)."""

    def __init__(self, root: Path, data: Path | None) -> None:
        self.root = root
        self.data = data
        self.store: Any = None
        self.by_number: dict[int, Play] = {}
        self.counter = itertools.count(1)

    async def start(self, date: dt.date, policy_name: str, base_url: str, model: str, pool_size: int = 20) -> Play:
        """Start a play once its policy's check passed; the check (a server that may take its whole timeout to
        answer) runs in a thread, so the pages keep being served meanwhile."""
        if self.data is None:
            raise TradeError("playing a day needs market data", hint="start the dashboard with --data DIR")
        policy = POLICIES.get(policy_name)
        settings = RunSettings(model=model, base_url=base_url or None, temperature=0.0)
        if policy.needs_server and not (base_url and model):
            raise TradeError(f"policy '{policy_name}' needs a served model", hint="fill in the base URL and model")
        await asyncio.to_thread(policy.check, settings)
        number = next(self.counter)
        folder = self.root / PLAYS / f"{date}-{policy_name}-{dt.datetime.now():%H%M%S}-{number}"
        play = Play(number, folder.relative_to(self.root).as_posix(), date, policy_name, Watched(policy))
        self.by_number[number] = play
        play.task = asyncio.get_running_loop().create_task(self._run(play, folder, settings, pool_size))
        return play

    async def _run(self, play: Play, folder: Path, settings: RunSettings, pool_size: int) -> None:
        try:
            await asyncio.to_thread(self._play, play, folder, settings, pool_size)
            play.state = "done"
        except TradeError as error:
            play.state, play.error = "failed", str(error)
        except Exception as error:  # shown on the page; the dashboard keeps serving
            log.exception("dashboard.play_failed", run=play.name)
            play.state, play.error = "failed", f"{error.__class__.__name__}: {error}"

    def _play(self, play: Play, folder: Path, settings: RunSettings, pool_size: int) -> None:
        from trade_data.store import MarketStore
        from trade_eval.backtest import Backtest, new_manifest, run_backtest

        if self.store is None:
            self.store = MarketStore.load(self.data)
        settings = play.watched.for_data(settings, self.store)
        backtest = Backtest(self.store, play.date, 1, pool_size=pool_size)
        command = ["trade", "eval", "dashboard", "play", str(play.date), play.policy]
        manifest = new_manifest(
            backtest, play.policy, settings, command=command, data=self.data, pool_file=None, pool_size=pool_size
        )
        run_backtest(backtest, play.watched, settings, folder, manifest, progress=False)
