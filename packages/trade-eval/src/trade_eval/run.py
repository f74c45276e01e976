"""What a backtest and a tasks run share: a policy playing one day, and the fields of the manifest that say who
played it and on what (:class:`~trade_records.runfolder.RunManifest`)."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path
from typing import Any

import structlog

from trade_core.errors import PluginError, error_line
from trade_data.store import MarketStore
from trade_eval.policy import DayUsage, Policy, PolicyUnavailable, RunSettings
from trade_records.runfolder import DataRef, Sampling, Usage
from trade_tools.day import TradingDay

log = structlog.get_logger("trade.eval")

LEFT_OPEN = "策略返回时交易日仍未结束"
DISTRIBUTIONS = ("trade-core", "trade-data", "trade-tools", "trade-eval")


async def play_day(
    policy: Policy, day: TradingDay, settings: RunSettings, event: str, **where: str
) -> tuple[Usage, str]:
    """Let ``policy`` play ``day``; returns what it took and why the policy could not play it ("" when it
    did). A policy that is unavailable or raises fails its day, never the run (logged as ``event`` with
    ``where``); a day it played and left open ends failed, as one it could not play does."""
    usage, failure = DayUsage(), ""
    try:
        usage = await policy.play(day, settings)
    except PolicyUnavailable as error:
        usage, failure = error.usage, error_line(error) or type(error).__name__
    except PluginError:  # strict mode: a broken plugin ends the run
        raise
    except Exception as error:
        log.exception(event, policy=policy.name, **where)
        failure = f"policy {policy.name} raised {type(error).__name__}: {error_line(error)}"
    if failure:
        day.episode.end("failed", failure)
    elif day.is_open:
        day.episode.end("failed", LEFT_OPEN)
    return Usage.of(day.episode, usage), failure


def manifest_fields(
    policy_name: str,
    settings: RunSettings,
    *,
    command: list[str],
    data: Path,
    store: MarketStore,
    policy_dist: str = "trade-eval",
) -> dict[str, Any]:
    """The fields every run's manifest has: the command, the policy with its model, sampling and options, the
    dataset and the installed versions."""
    return {
        "command": command,
        "policy": policy_name,
        "model": settings.model,
        "sampling": Sampling(
            temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_tokens, seed=settings.seed
        ),
        "options": settings.options,
        "data": DataRef.of(data, store),
        "versions": versions(policy_dist),
    }


def versions(policy_dist: str) -> dict[str, str]:
    """Installed versions of trade-agent's packages and of the policy's distribution."""
    found = {}
    for name in dict.fromkeys([*DISTRIBUTIONS, policy_dist]):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return found
