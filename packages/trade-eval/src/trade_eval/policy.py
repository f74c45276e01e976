"""A policy plays one trading day through the Episode's tools: a served LLM, or a baseline rule.

Every policy acts only by tool calls on a :class:`~trade_tools.day.TradingDay`, the lifecycle training uses,
so fills, fees, refusals and the trajectory record are the same for a model and a baseline. Policies are
stateless plugins: what a run configures arrives as :class:`RunSettings`, and what a day cost comes back as
:class:`DayUsage`. ``play`` is a coroutine so many days can be in flight against one server.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from trade_core.registry import Registry
from trade_eval import hookspecs
from trade_eval.settings import RunSettings
from trade_records.runfolder import DayUsage
from trade_tools.day import TradingDay

if TYPE_CHECKING:
    from trade_data.store import MarketStore


class PolicyUnavailable(Exception):
    """The policy could not finish the day for reasons outside the model (server down, timeouts after retries).

    The backtest records the day as failed with this reason and holds the morning's portfolio.
    """

    def __init__(self, message: str, usage: DayUsage | None = None) -> None:
        """``usage``: what the day cost before it failed (requests, retries, tokens), for the run's table."""
        super().__init__(message)
        self.usage = usage or DayUsage()


class Policy(ABC):
    """A way to trade a day. Subclasses set ``name`` and ``description`` and implement :meth:`play`."""

    name: ClassVar[str]
    description: ClassVar[str]
    needs_server: ClassVar[bool] = False
    """Whether the policy needs ``--base-url`` and ``--model`` (the CLI refuses to start without them)."""
    reads_prompt: ClassVar[bool] = True
    """Whether the policy reads the Episode's system and user prompts; rule-based baselines do not, and skip
    rendering them (the market summary is most of a baseline day's cost)."""
    plays_in_workers: ClassVar[bool] = True
    """Whether forked worker processes can play it (``trade eval tasks --workers``); not a policy whose model and
    its threads live in this process: a fork copies neither the threads nor a GPU's context."""

    def check(self, settings: RunSettings) -> None:  # noqa: B027 (most policies have nothing to check)
        """Refuse a run this policy cannot play, before any day starts (raise a TradeError: one line on the CLI)."""

    def for_data(self, settings: RunSettings, store: MarketStore) -> RunSettings:
        """The settings for a run on ``store``, once it is loaded (a default read from the dataset, say); raise a
        TradeError to refuse the run before any day starts."""
        return settings

    @abstractmethod
    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        """Play ``day`` until it closes (``day.is_open`` is False) using its tools only.

        Raise :class:`PolicyUnavailable` for failures outside the model. A day left open is ended by the
        caller as failed.
        """


POLICIES = Registry(hookspecs.trade_register_policies, "policy", Policy)
