"""Point in time for tools: nothing a tool is given reaches past T0, and every tool's text at T0 is
identical when every bar after T0 is changed (real data and a synthetic market with a planted signal, random
days, through the real write and load path).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_core import hookimpl
from trade_core.plugins import get_manager
from trade_core.testing import inline_plugin
from trade_data.market_model import generate_market
from trade_data.qlib_dir import DatasetMeta, read_calendar_file, read_instruments_file, write_dataset
from trade_data.signals import PlantedSignal
from trade_data.store import MarketStore
from trade_data.testing import perturb_future
from trade_tools.episode import DEFAULT_TOOLS, Episode, EpisodeSettings
from trade_tools.indicators import INDICATORS
from trade_tools.sampler import day_task
from trade_tools.tool import Arguments, Tool

ALPHA = ["KMID", "ROC20", "RSQR60", "CORD30", "Mean($close,5)/Ref($close,10)", "Std($volume,20)/Mean($volume,20)"]


def random_calls(pool: list[str], rng: np.random.Generator, n: int = 40) -> list[tuple[str, str]]:
    calls = []
    for _ in range(n):
        kind = rng.integers(4)
        symbol = str(rng.choice(pool))
        if kind == 0:
            names = list(rng.choice(INDICATORS, size=int(rng.integers(1, 8)), replace=False))
            args = {"symbol": symbol, "period": f"{int(rng.integers(1, 120))}d", "indicators": names}
            calls.append(("get_price_data", json.dumps(args)))
        elif kind == 1:
            index = str(rng.choice(["SH000300", "SH000905", "SH000001"]))
            calls.append(
                ("get_macro_indicators", json.dumps({"index": index, "period": f"{int(rng.integers(2, 120))}d"}))
            )
        elif kind == 2:
            symbols = list(rng.choice(pool, size=int(rng.integers(1, len(pool))), replace=False))
            args = {"expression": str(rng.choice(ALPHA)), "symbols": symbols}
            if rng.random() < 0.3:  # the whole pool
                del args["symbols"]
            calls.append(("compute_alpha_factor", json.dumps(args)))
        else:
            side = str(rng.choice(["buy", "sell"]))
            calls.append(
                ("TakeAction", json.dumps({"type": side, "symbol": symbol, "amount": int(rng.integers(1, 30)) * 100}))
            )
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_tool_texts_ignore_the_future(
    seed: int, sample_store: MarketStore, sample_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(seed)
    t0 = sample_store.calendar[int(rng.integers(80, len(sample_store.calendar) - 5))]
    table, members = perturb_future(sample_table, read_instruments_file(sample_data / "csi300.txt"), t0, seed)
    out = write_dataset(
        table,
        tmp_path / "perturbed",
        meta=DatasetMeta(source="perturbed"),
        calendar=read_calendar_file(sample_data / "calendar.txt"),
        universes={"csi300": members},
    )
    check_future_is_ignored(sample_store, MarketStore.load(out), t0, rng, seed)


@pytest.mark.parametrize("seed", [21, 22])
def test_tool_texts_ignore_the_future_of_a_planted_signal_market(seed: int, tmp_path: Path) -> None:
    """A planted signal moves each next day by today's bars: the tools' texts (its factor's too) still see
    nothing of the changed future."""
    market = generate_market(80, "2020-01-01", "2021-03-31", seed=seed, signal=PlantedSignal(name="KMID", ic=0.3))
    rng = np.random.default_rng(seed)
    t0 = market.calendar[int(rng.integers(80, len(market.calendar) - 5))]
    meta = DatasetMeta(synthetic=True, source="synth", parameters=market.parameters)
    members = market.universes["csi300"]
    original = write_dataset(
        market.table, tmp_path / "original", meta=meta, calendar=market.calendar, universes={"csi300": members}
    )
    table, changed = perturb_future(market.table, members, t0, seed)
    perturbed = write_dataset(
        table, tmp_path / "perturbed", meta=meta, calendar=market.calendar, universes={"csi300": changed}
    )
    store = MarketStore.load(original)
    assert store.planted_signal == MarketStore.load(perturbed).planted_signal == "KMID"
    check_future_is_ignored(store, MarketStore.load(perturbed), t0, rng, seed)


def check_future_is_ignored(
    store: MarketStore, perturbed: MarketStore, t0: pd.Timestamp, rng: np.random.Generator, seed: int
) -> None:
    """The same task, prompts, tool texts and episode at ``t0`` on both stores; and T0+1's differ, so the check
    could fail."""
    task = day_task(store, t0.date().isoformat(), pool_size=12, seed=seed)
    assert day_task(perturbed, t0.date().isoformat(), pool_size=12, seed=seed) == task
    original, changed = Episode.start(task, store), Episode.start(task, perturbed)
    assert changed.messages() == original.messages()
    for name, arguments in random_calls(task.pool, rng):
        assert changed.call(name, arguments) == original.call(name, arguments), (name, arguments)
    assert changed.model_dump() == original.model_dump() and original.internal_errors == 0
    later = store.shift(t0, 1).isoformat()  # the check can fail: the next day sees the change
    symbol = task.pool[0]
    next_day = {"symbol": symbol}
    assert Episode.start(task.model_copy(update={"date": later}), store).call("get_price_data", next_day) != (
        Episode.start(task.model_copy(update={"date": later}), perturbed).call("get_price_data", next_day)
    )


def _references(obj: object) -> Iterator[object]:
    """What ``obj`` refers to by attribute, item, closure or bound ``self``: every way a tool can follow."""
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, list | tuple | set | frozenset):
        yield from obj
    if isinstance(obj, types.MethodType):
        yield obj.__self__
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        yield from (cell.cell_contents for cell in obj.__closure__ or ())
        yield from (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values())
    if isinstance(obj, functools.partial):
        yield from (obj.func, *obj.args, *obj.keywords.values())
    for name in ("__dict__", "__pydantic_private__", "__pydantic_extra__", "__pydantic_fields_set__"):
        found = getattr(obj, name, None)
        if isinstance(found, dict | set):
            yield found
    for name in getattr(type(obj), "__slots__", ()):
        if hasattr(obj, name):
            yield getattr(obj, name)


def reachable(*roots: object) -> list[object]:
    """Every object reachable from ``roots``, except modules and classes (from which anything is: a tool
    could import the store's module too; what is checked is what a tool is handed) and numpy's ``base``
    (the owner of a slice's memory: the view keeps slices of the store's arrays, not copies)."""
    seen, todo, found = set(), list(roots), []
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType):
            continue
        seen.add(id(obj))
        found.append(obj)
        todo.extend(_references(obj))
    return found


def test_a_plugin_tool_finds_no_way_past_t0(sample_store: MarketStore) -> None:
    """A tool registered by a plugin gets the Episode, its arguments and itself; from all of them it reaches
    no MarketStore, no date after T0, no symbol listed after T0 and no array memory holding a later day."""
    reached: list[object] = []

    class SnoopArgs(Arguments):
        pass

    class Snoop(Tool):
        name = "snoop"
        description = "读取能拿到的一切"
        arguments = SnoopArgs

        def run(self, episode: Episode, args: SnoopArgs) -> str:
            episode.view.window("SH600519", 30)  # what a tool reads first, so caches it fills are seen too
            reached.extend(reachable(episode, args, self, self.run))
            return "好"

    class Plugin:
        @hookimpl
        def trade_register_tools(self, register):  # type: ignore[no-untyped-def]
            register(Snoop())

    t0 = sample_store.calendar[len(sample_store.calendar) // 2].date()
    index = sample_store.day_index(t0)
    later_listings = {s for j, s in enumerate(sample_store.symbols) if sample_store.first_day[j] > index}
    assert later_listings  # the check below can fail
    task = day_task(sample_store, t0.isoformat(), pool_size=6, seed=1)
    with inline_plugin(get_manager(), Plugin(), "snoop-tool"):
        episode = Episode.start(task, sample_store, settings=EpisodeSettings(tools=(*DEFAULT_TOOLS, "snoop")))
        episode.call("get_price_data", {"symbol": task.pool[0]})
        episode.messages()  # the market summary lands in the view's memo
        assert episode.call("snoop", {}) == "好"
    future = [values[index + 1 :] for values in _store_arrays(sample_store)]
    arrays = [obj for obj in reached if isinstance(obj, np.ndarray)]
    assert len(arrays) >= 20 and any(obj is episode.view for obj in reached)  # it did look
    # The rules' schedules (a stamp duty from 2023-08-28, ...) are regulation with its dates, not market data.
    schedule = {id(obj) for obj in reachable(episode.rules)}
    for obj in reached:
        assert not isinstance(obj, MarketStore), "a MarketStore is reachable"
        assert not (isinstance(obj, str) and obj in later_listings), obj
        assert id(obj) in schedule or _day(obj) is None or _day(obj) <= t0, obj
    for array in arrays:
        if array.dtype.kind == "M":
            assert array.size == 0 or array.max() <= np.datetime64(t0)
        assert not any(np.may_share_memory(array, rows) for rows in future), array.shape


def _store_arrays(store: MarketStore) -> list[np.ndarray]:
    """Every [day, ...] array of the store, its universes' membership included."""
    found = [*store.adjusted.values(), *(store.membership(u) for u in store.universe_names)]
    found += [value for value in vars(store).values() if isinstance(value, np.ndarray) and value.ndim == 2]
    return [*found, store.dates]


def _day(obj: object) -> dt.date | None:
    """The day ``obj`` names, if it is a date, a timestamp or an ISO date text."""
    if isinstance(obj, dt.datetime | pd.Timestamp):
        return obj.date()
    if isinstance(obj, dt.date):
        return obj
    if isinstance(obj, np.datetime64):
        return pd.Timestamp(obj).date()
    if isinstance(obj, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}.*", obj):
        return dt.date.fromisoformat(obj[:10])
    return None
