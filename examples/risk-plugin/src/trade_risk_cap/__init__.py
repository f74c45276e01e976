"""trade-risk-cap: no buy may make one stock more than a share of the portfolio; each finished run notes the vetoes.

Two event hooks: ``trade_veto_order`` (trade-tools') sees every order before it executes and returns the reason
the model reads when it vetoes one; ``trade_run_finished`` (trade-core's) writes what was vetoed into the run's
folder as ``risk_cap.json``. The cap is ``TRADE_RISK_CAP`` (a fraction of the portfolio value, default 0.25).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trade_core import hookimpl
from trade_core.files import atomic_write

if TYPE_CHECKING:
    from trade_tools.episode import Episode
    from trade_tools.portfolio import Fill

CAP = "TRADE_RISK_CAP"
NOTE = "risk_cap.json"
vetoed: list[dict[str, Any]] = []
"""The orders vetoed in this process since the last run finished (a backtest plays its days in one process)."""


def cap() -> float:
    """The largest share of the portfolio value one stock may be after a buy."""
    raw = os.environ.get(CAP, "0.25")
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 1:
        raise ValueError(f"{CAP}={raw!r} is not a fraction of the portfolio in (0, 1], e.g. {CAP}=0.25")
    return value


@hookimpl(optionalhook=True)  # trade-tools' hook: trade keeps working if its plugin is disabled
def trade_veto_order(episode: Episode, order: Fill) -> str | None:
    if order.side != "buy":
        return None
    held = episode.positions.get(order.symbol)
    weight = ((held.shares if held else 0) + order.shares) * order.close / episode.value()
    limit = cap()
    if weight <= limit:
        return None
    vetoed.append({"date": str(episode.task.date), "symbol": order.symbol, "shares": order.shares, "weight": weight})
    return f"买入后该股票将占组合的{weight:.0%}，超过单只股票{limit:.0%}的上限"


@hookimpl
def trade_run_finished(kind: str, folder: Path) -> None:
    note = {"kind": kind, "cap": cap(), "vetoed": vetoed}
    atomic_write(Path(folder) / NOTE, json.dumps(note, ensure_ascii=False, indent=2) + "\n")
    vetoed.clear()
