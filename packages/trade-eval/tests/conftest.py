"""Helpers for trade-eval's tests: backtests on the real data, a user's policy package on a site folder and
a run folder's writer lock held by another process."""

from __future__ import annotations

import datetime as dt
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from trade_data.store import MarketStore
from trade_eval.backtest import Backtest

FIXTURES = Path(__file__).parent / "fixtures"
TUTORIAL = dt.date(2025, 6, 20)


def pytest_configure(config: pytest.Config) -> None:
    """Opt into trade-data's fixtures (a conftest below the rootdir cannot name them in ``pytest_plugins``), and,
    where trade-train is installed (the envs that serve a model: eval, vllm), its taught tiny model: the
    ``tiny_model`` fixture builds it with ``trade model tiny``, a trade-train command, so these tests need
    trade-train only at run time, not as an import."""
    config.pluginmanager.import_plugin("trade_data.testing")
    if importlib.util.find_spec("trade_train") is not None:
        config.pluginmanager.import_plugin("trade_train.testing")


@pytest.fixture
def backtest(sample_store: MarketStore):  # type: ignore[no-untyped-def]
    """``backtest(num_days, start=TUTORIAL, **kwargs)``: a :class:`Backtest` on the real data (pool of 20, seed 0)."""

    def make(num_days: int = 60, start: dt.date = TUTORIAL, **kwargs: object) -> Backtest:
        return Backtest(sample_store, start, num_days, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def policy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the distribution ``trade-eval-testpolicy`` as pip installs one (module, dist-info with
    its ``trade`` entry point): on PYTHONPATH, ``trade`` loads it like any user's plugin package."""
    site = tmp_path_factory.mktemp("site")
    shutil.copy(FIXTURES / "trade_eval_testpolicy.py", site)
    info = site / "trade_eval_testpolicy-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trade-eval-testpolicy\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[trade]\ntestpolicy = trade_eval_testpolicy\n")
    return site


HOLD = """
import os, signal, sys
from pathlib import Path
from trade_records.runfolder import writer_lock
with writer_lock(Path(sys.argv[1])):
    print("held", flush=True)
    if sys.argv[2] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()
"""


@pytest.fixture
def lock_holder() -> Callable[..., AbstractContextManager[subprocess.Popen]]:
    """``with lock_holder(out) as holder:`` another process holds ``out``'s writer lock until the block ends;
    ``die=True``: it is SIGKILLed while holding it, as a crashed run would be."""

    @contextmanager
    def hold(out: Path, *, die: bool = False) -> Iterator[subprocess.Popen]:
        argv = [sys.executable, "-c", HOLD, str(out), "die" if die else "wait"]
        holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            if die:
                assert holder.wait(timeout=60) == -9
            yield holder
        finally:
            if holder.stdin is not None:
                holder.stdin.close()
            holder.wait(timeout=60)

    return hold
