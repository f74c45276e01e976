"""trade-risk-cap: no buy may make one stock more than a share of the portfolio; each finished run notes the vetoes.

Two event hooks: ``trade_veto_order`` (trade-tools') sees every order before it executes and returns the reason
the model reads when it vetoes one; ``trade_run_finished`` (trade-core's) writes what the run vetoed into its
folder as ``risk_cap.json``. The cap is ``TRADE_RISK_CAP`` (a fraction of the portfolio value, default 0.25).

Per-run state that works with workers: episodes may play in other processes than the one that hears the run
finish (``trade eval tasks --workers N`` forks them; ``trade train`` launches a trainer whose Ray workers play
the rollouts), and no process sees another's memory. So each veto is appended, as one line, to a file in the
run's folder that every process of the run shares (``run.folder``; ``run.run_id`` tells this run's lines from
an earlier run's in the same folder), and the parent reads them all back when the run finishes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from trade_core import hookimpl
from trade_core.files import append_line, atomic_write, read_jsonl

if TYPE_CHECKING:
    from trade_core.runs import RunContext
    from trade_tools.episode import Episode
    from trade_tools.portfolio import Fill

CAP = "TRADE_RISK_CAP"
NOTE = "risk_cap.json"
VETOES = ".risk_cap.vetoes.jsonl"
"""Every process of a run appends its vetoes here, a whole line per write; the parent folds them into NOTE."""


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
def trade_veto_order(episode: Episode, order: Fill, run: RunContext | None) -> str | None:
    if order.side != "buy":
        return None
    held = episode.positions.get(order.symbol)
    weight = ((held.shares if held else 0) + order.shares) * order.close / episode.value()
    limit = cap()
    if weight <= limit:
        return None
    if run is not None and run.folder is not None:  # outside a run (`trade tools play`) there is nothing to note
        vetoed = {"date": str(episode.task.date), "symbol": order.symbol, "shares": order.shares, "weight": weight}
        line = {"run_id": run.run_id, "pid": os.getpid(), **vetoed}
        append_line(run.folder / VETOES, json.dumps(line, ensure_ascii=False))
    return f"买入后该股票将占组合的{weight:.0%}，超过单只股票{limit:.0%}的上限"


@hookimpl
def trade_run_finished(kind: str, folder: Path | None, run: RunContext) -> None:
    if folder is None:
        return
    lines = read_jsonl(Path(folder) / VETOES)
    vetoed = [{k: v for k, v in line.items() if k != "run_id"} for line in lines if line.get("run_id") == run.run_id]
    note = {"kind": kind, "run_id": run.run_id, "cap": cap(), "vetoed": vetoed}
    atomic_write(Path(folder) / NOTE, json.dumps(note, ensure_ascii=False, indent=2) + "\n")
