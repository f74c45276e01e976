"""The memorisation guard against a lookup: what an anonymized episode shows of a stock, looked up in the whole
dataset, must not name the stock or the day more often than chance; and an order in the model's units is the same
real order the plain episode would place.

The attack (issue 25): the T0 bar ``get_price_data`` prints (open, high, low, close, volume), matched exactly or
nearest on levels against every bar of the dataset, with and without knowing T0. Before per-stock scales it
named 100 of 100 aliases and their dates. The scale-free lookup (the bar's open/high/low over its close and the
last days' changes) is what the guard does not hide; its share is measured and printed, not bounded.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest

from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_tools import text
from trade_tools.episode import Episode, EpisodeSettings
from trade_tools.records import Task
from trade_tools.sampler import day_task

DAYS, POOL = 10, 10
"""100 aliases per market: 10 random days of 10 pool stocks."""
IDENTIFIED_AT_MOST = 0.05
"""The guard's bound on a level lookup. Chance is 1 in ~1e5 bars without T0 and 1 in the day's stocks (1 in 40
to 1 in 500) with it: at 100 aliases chance gives 0-3 hits, so 5 of 100 is above chance only by a margin that
the draw's noise does not reach, and the plain view's 100% is far beyond it."""
_LATEST = re.compile(r"最新：\S+ 开([\d.]+) 高([\d.]+) 低([\d.]+) 收([\d.]+) 量([\d.]+)(万|亿)?手")
_MARK = re.compile(r"([↑↓→])([\d.]+)%")


@dataclass(eq=False)
class Table:
    """Every bar of a dataset as an attacker holds it: raw levels [day, symbol], and adjusted daily changes."""

    symbols: list[str]
    levels: np.ndarray  # [field, day, symbol]: open, high, low, close, volume
    changes: np.ndarray  # [day, symbol]: adjusted close over the previous traded close

    @classmethod
    @functools.cache
    def of(cls, store: MarketStore) -> Table:
        view = store.asof(store.dates[-1])
        symbols = [s for s in view.symbols() if board_of(s) is not Board.INDEX]
        levels = np.full((5, len(store.dates), len(symbols)), np.nan)
        changes = np.full((len(store.dates), len(symbols)), np.nan)
        for j, symbol in enumerate(symbols):  # every traded bar, as the import leaves it
            raw, adjusted = (view.window(symbol, len(store.dates), adjusted=a) for a in (False, True))
            rows = np.searchsorted(store.dates, raw.dates)
            for f, name in enumerate(("open", "high", "low", "close", "volume")):
                levels[f, rows, j] = getattr(raw, name)
            changes[rows[1:], j] = adjusted.close[1:] / adjusted.close[:-1] - 1
        return cls(symbols, levels, changes)

    @functools.cached_property
    def logs(self) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.log(self.levels)

    @functools.cached_property
    def ratios(self) -> np.ndarray:
        """[field, day, symbol]: open, high and low over the close."""
        return self.levels[:3] / self.levels[3]

    @functools.cached_property
    def shown_levels(self) -> tuple[np.ndarray, np.ndarray]:
        """Prices to the cent and volumes in shares to the digits ``get_price_data`` prints them with."""
        volume = np.vectorize(lambda shares: printed_shares(text.lots(shares)))(np.nan_to_num(self.levels[4], nan=-1))
        return np.round(self.levels[:4], 2), volume

    @functools.cached_property
    def recent(self) -> np.ndarray:
        """[day, symbol, k]: each bar's last ``k`` = 4 changes over the symbol's own traded bars, NaN where fewer,
        as sizes (the marks' arrows are the signs)."""
        k = 4
        out = np.full((*self.changes.shape, k), np.nan)
        for j in range(self.changes.shape[1]):
            traded = np.flatnonzero(~np.isnan(self.levels[3, :, j]))
            values = self.changes[traded, j]
            for i in range(k):
                out[traded[i:], j, k - 1 - i] = values[: len(values) - i] if i else values
        return np.abs(out)


def printed_shares(lots: str) -> float:
    """The shares a volume printed in 手 (``text.lots``: ``2.50万手``) reads."""
    found = re.fullmatch(r"([\d.]+)(万|亿)?手", lots)
    return float(found[1]) * {"万": 1e4, "亿": 1e8, None: 1}[found[2]] * 100 if found else math.nan


def shown_bar(answer: str) -> tuple[np.ndarray, np.ndarray]:
    """The T0 bar (open, high, low, close, volume in shares) and the last four changes a price answer prints."""
    found = _LATEST.search(answer)
    assert found, answer
    volume = printed_shares(found[0].split("量")[1].split()[0])
    marks = [(-1 if sign == "↓" else 1) * float(v) / 100 for sign, v in _MARK.findall(answer.split("近5日：")[1])]
    return np.array([*map(float, found.groups()[:4]), volume]), np.array(marks[-4:])


def attack(store: MarketStore, anonymized: bool, universe: str, seed: int = 7, noise: float = 0.0) -> dict[str, float]:
    """Shares of aliases whose real (symbol, day) each lookup names, over DAYS random days' pools (``noise``: the
    episodes' ``anonymize_noise``)."""
    table = Table.of(store)
    recent, (shown_levels, shown_volume) = table.recent, table.shown_levels
    rng = np.random.default_rng(seed)
    days = rng.choice(np.arange(60, len(store.dates)), size=DAYS, replace=False)
    hits = dict.fromkeys(("exact", "exact at T0", "nearest", "nearest at T0", "scale-free", "scale-free at T0"), 0)
    total = 0
    for t in days:
        task = day_task(store, store.dates[t].astype(object), pool_size=POOL, universe=universe, seed=int(t))
        episode = Episode.start(
            task.model_copy(update={"anonymized": anonymized}), store, settings=EpisodeSettings(anonymize_noise=noise)
        )
        for symbol in task.pool:
            alias = episode.aliases.symbols[symbol] if episode.aliases else symbol
            bar, marks = shown_bar(episode.call("get_price_data", {"symbol": alias}))
            truth = (t, table.symbols.index(symbol))
            total += 1
            exact = np.all(shown_levels == bar[:4, None, None], axis=0) & (shown_volume == bar[4])
            with np.errstate(all="ignore"):
                distance = np.nansum(np.abs(table.logs - np.log(bar)[:, None, None]), axis=0)
                free = np.abs(table.ratios - (bar[:3] / bar[3])[:, None, None]).sum(axis=0)
                free += np.abs(recent - np.abs(marks)).sum(axis=2)
            distance[np.isnan(table.levels[3])] = np.inf
            free[np.isnan(free)] = np.inf
            for name, hit in (
                ("exact", exact.sum() == 1 and exact[truth]),
                ("exact at T0", exact[t].sum() == 1 and exact[truth]),
                ("nearest", np.unravel_index(np.argmin(distance), distance.shape) == truth),
                ("nearest at T0", np.argmin(distance[t]) == truth[1]),
                ("scale-free", np.unravel_index(np.argmin(free), free.shape) == truth),
                ("scale-free at T0", np.argmin(free[t]) == truth[1]),
            ):
                hits[name] += bool(hit)
    return {name: count / total for name, count in hits.items()}


@pytest.mark.parametrize("market", ["synthetic", "real"])
def test_a_lookup_of_the_shown_bars_names_no_more_aliases_than_chance(
    market: str, request: pytest.FixtureRequest
) -> None:
    store = request.getfixturevalue("synth_store" if market == "synthetic" else "sample_store")
    universe = "all" if market == "synthetic" else "csi300"
    shares = attack(store, anonymized=True, universe=universe)
    figures = ", ".join(f"{name} {share:.0%}" for name, share in shares.items())
    print(f"\n{market} market, {DAYS * POOL} aliases identified by: {figures}")
    levels = {name: share for name, share in shares.items() if not name.startswith("scale-free")}
    assert max(levels.values()) <= IDENTIFIED_AT_MOST, figures


def play_in_units(store: MarketStore, day: object, seed: int, orders: int = 12) -> tuple[Episode, Episode]:
    """An anonymized episode given random orders in units, and the plain episode given the real shares each of its
    accepted orders traded, in the same order (its refused orders too, at a share count no unit amount reaches)."""
    task = day_task(store, day, pool_size=POOL, universe="all", seed=seed)  # type: ignore[arg-type]
    anonymized = Episode.start(task.model_copy(update={"anonymized": True}), store)
    plain = Episode.start(task, store)
    rng = np.random.default_rng(seed)
    alias = anonymized.aliases.symbols  # type: ignore[union-attr]
    for _ in range(orders):
        held = sorted(anonymized.positions)
        side = "sell" if held and rng.random() < 0.4 else "buy"
        symbol = str(rng.choice(held if side == "sell" else task.pool))
        if side == "sell":
            units = anonymized.positions[symbol].sellable / anonymized.price_scale(symbol) * rng.uniform(0.2, 1.2)
        else:
            units = (
                anonymized.cash
                * rng.uniform(0.01, 0.5)
                / (anonymized.view.last_close(symbol) * anonymized.price_scale(symbol))
            )
        anonymized.call("TakeAction", {"type": side, "symbol": alias[symbol], "amount": max(1, int(units))})
        fill = anonymized.actions[-1].fill
        if fill is not None:
            plain.call("TakeAction", {"type": side, "symbol": symbol, "amount": fill.shares})
            assert plain.actions[-1].fill == fill
        assert anonymized.cash == plain.cash and anonymized.positions == plain.positions
    return anonymized, plain


@pytest.mark.parametrize("market", ["synthetic", "real"])
def test_an_order_in_units_is_the_real_order_of_its_fill(market: str, request: pytest.FixtureRequest) -> None:
    """Over many random episodes: each fill's shares are whole lots (STAR: at least the minimum) worth at most the
    units ordered, its text reads units x shown price = CNY, and the plain episode given those shares fills the same,
    so cash, holdings and value agree to the cent."""
    store = request.getfixturevalue("synth_store" if market == "synthetic" else "sample_store")
    rng = np.random.default_rng(3)
    filled = 0
    for t in rng.choice(np.arange(30, len(store.dates)), size=25, replace=False):
        anonymized, plain = play_in_units(store, store.dates[t].astype(object), seed=int(t))
        assert anonymized.value() == plain.value() and anonymized.costs_paid() == plain.costs_paid()
        for action in anonymized.actions:
            if (fill := action.fill) is None:
                continue
            filled += 1
            scale = anonymized.price_scale(fill.symbol)
            assert fill.shares <= action.amount * scale + 1e-6 or fill.side == "sell"  # type: ignore[operator]
            star = board_of(fill.symbol) is Board.STAR
            sold_all = fill.side == "sell" and fill.symbol not in anonymized.positions
            assert sold_all or (fill.shares >= 200 if star else fill.shares % 100 == 0)
            assert math.isclose(fill.shares / scale * fill.price * scale, fill.gross, abs_tol=0.006)  # cents
    assert filled > 50


@pytest.mark.parametrize("market", ["synthetic", "real"])
def test_units_for_types_the_shares_code_sizes_an_order_in(market: str, request: pytest.FixtureRequest) -> None:
    """``units_for``: the units whose order trades exactly the real shares asked for, for whole lots while a unit
    is at most a lot and for STAR counts while it is at most a share (else the fewest units trading more); a sell
    of every sellable share and a part of a holding too. A plain episode types the shares themselves."""
    store = request.getfixturevalue("synth_store" if market == "synthetic" else "sample_store")
    rng = np.random.default_rng(5)
    exact = coarse = 0
    for t in rng.choice(np.arange(30, len(store.dates)), size=DAYS, replace=False):
        task = day_task(store, store.dates[t].astype(object), pool_size=POOL, universe="all", seed=int(t))
        anonymized = Episode.start(task.model_copy(update={"anonymized": True}), store)
        for symbol in task.pool:
            unit, star = anonymized.price_scale(symbol), board_of(symbol) is Board.STAR
            for shares in [*range(100, 3001, 100), *(range(200, 1000, 7) if star else ())]:
                traded = anonymized.shares_for("buy", symbol, anonymized.units_for(symbol, shares))
                if unit <= (1 if star else 100):
                    assert traded == shares, (task.task_id, symbol, shares)
                    exact += 1
                else:
                    fewer = anonymized.shares_for("buy", symbol, anonymized.units_for(symbol, shares) - 1)
                    assert fewer < shares <= traded, (task.task_id, symbol, shares)
                    coarse += traded > shares
                assert Episode.start(task, store).units_for(symbol, shares) == shares
        for symbol, position in anonymized.positions.items():
            part = (position.sellable - 100) // 100 * 100
            names_part = part > 0 and anonymized.price_scale(symbol) <= (1 if board_of(symbol) is Board.STAR else 100)
            for shares in (position.sellable, *((part,) if names_part else ())):
                assert anonymized.shares_for("sell", symbol, anonymized.units_for(symbol, shares)) == shares
    assert exact > 1000 and (coarse or market == "real")  # its pools drawn here hold no STAR unit over a share


def test_relative_figures_read_as_in_the_plain_episode(sample_store: MarketStore) -> None:
    """Changes, RSI, volatility and a ratio factor's values and ranks are the plain episode's, digit for digit."""
    task = day_task(sample_store, "2024-06-14", pool_size=POOL, seed=2)
    anonymized = Episode.start(task.model_copy(update={"anonymized": True}), sample_store)
    plain = Episode.start(task, sample_store)
    alias = anonymized.aliases.symbols  # type: ignore[union-attr]
    percents = re.compile(r"[+-]?\d+\.\d+%|RSI_14: [\d.]+")
    for symbol in task.pool:
        args = {"indicators": ["RSI_14", "VOL_20", "ROC_20"], "period": "20d"}
        shown = anonymized.call("get_price_data", {"symbol": alias[symbol], **args})
        assert percents.findall(shown) == percents.findall(plain.call("get_price_data", {"symbol": symbol, **args}))
    factor = [
        anonymized.reveal(e.call("compute_alpha_factor", {"expression": "KMID"})).splitlines()[2:]
        for e in (anonymized, plain)
    ]
    assert sorted(factor[0], key=lambda line: line.split(". ")[1]) == sorted(
        factor[1], key=lambda line: line.split(". ")[1]
    )


def test_the_rules_read_the_same_on_every_day(sample_store: MarketStore) -> None:
    """The stamp duty changed on 2023-08-28 and ChiNext's limit on 2020-08-24: an anonymized rules text that
    followed them would date T0."""
    texts = set()
    for day in ("2019-06-03", "2021-06-01", "2024-06-14"):
        task = day_task(sample_store, day, pool_size=POOL, seed=0).model_copy(update={"anonymized": True})
        system = Episode.start(task, sample_store).messages()[0]["content"]
        texts.add(system.split("## 交易规则")[1].split("## 工作流程")[0])
    assert len(texts) == 1


GUARDED_NOISE = 0.01
"""The smallest measured noise at which no lookup that does not know T0 names more than :data:`IDENTIFIED_AT_MOST`
(the day is at chance); knowing T0, the stock among the day's takes more (README)."""
NOISES = (0.002, 0.005, 0.01, 0.02, 0.05) if os.environ.get("TRADE_NOISE_TABLE") else (GUARDED_NOISE,)
"""``anonymize_noise`` values measured: the README's table with ``TRADE_NOISE_TABLE=1`` (minutes), else one."""


def factor_cost(store: MarketStore, noise: float, universe: str, factor: str = "KMID") -> tuple[float, float, float]:
    """(rank correlation of ``factor`` as shown with it as plain, its rank IC with the next day's return as shown,
    as plain), means over days of the universe's whole cross-section: what the noise costs a signal."""
    from trade_tools.alpha import ranked_at_t0, resolve

    rng = np.random.default_rng(11)
    node = resolve(factor)[1]
    agreement, ic_shown, ic_plain = [], [], []
    for t in rng.choice(np.arange(60, len(store.dates) - 1), size=3 * DAYS, replace=False):
        day = store.dates[t].astype(object)
        view = store.asof(day)
        pool = [s for s in view.members(universe) if board_of(s) is not Board.INDEX and not view.is_suspended(s)]
        task = Task(task_id=f"cost-{t}", date=day, pool=pool, cash=1e6, universe=universe, anonymized=True)
        episode = Episode.start(task, store, settings=EpisodeSettings(anonymize_noise=noise))
        plain = dict(ranked_at_t0(view, node, pool))
        shown = dict(ranked_at_t0(view, node, pool, functools.partial(episode.shown_columns, pool)))
        after = store.asof(store.dates[t + 1].astype(object))
        forward = {s: after.last_close(s, adjusted=True) / view.last_close(s, adjusted=True) - 1 for s in pool}
        columns = np.array([[plain[s], shown[s], forward[s]] for s in pool])
        columns = columns[~np.isnan(columns).any(axis=1)]
        ranks = np.argsort(np.argsort(columns, axis=0), axis=0)
        correlation = np.corrcoef(ranks.T)
        agreement.append(correlation[0, 1])
        ic_shown.append(correlation[1, 2])
        ic_plain.append(correlation[0, 2])
    return float(np.mean(agreement)), float(np.mean(ic_shown)), float(np.mean(ic_plain))


@pytest.fixture(scope="module")
def signal_store(tmp_path_factory: pytest.TempPathFactory) -> MarketStore:
    """A synthetic market of 100 stocks over 2020 with KMID planted at rank IC 0.2."""
    from trade_data.signals import PlantedSignal
    from trade_data.synth import write_synthetic_market

    signal = PlantedSignal(name="KMID", ic=0.2)
    out = write_synthetic_market(
        tmp_path_factory.mktemp("signal") / "m", 100, "2020-01-01", "2020-12-31", 3, signal=signal
    )
    return MarketStore.load(out)


@pytest.mark.real_data
@pytest.mark.parametrize("market", ["synthetic", "real"])
def test_the_noise_breaks_the_scale_free_lookup_at_a_measured_cost(market: str, request: pytest.FixtureRequest) -> None:
    """With ``anonymize_noise`` the shown bars' shape and changes are no longer the real ones: the scale-free
    lookup that names every alias without it names at most 5% at :data:`GUARDED_NOISE` (as does every lookup
    that does not know T0). Prints the README's rows: lookup shares and the cost to a factor's signal (on the
    signal market: a planted KMID)."""
    store = request.getfixturevalue("signal_store" if market == "synthetic" else "sample_store")
    universe = "all" if market == "synthetic" else "csi300"
    rows, guarded = [], []
    for noise in (0.0, *NOISES):
        shares = attack(store, anonymized=True, universe=universe, noise=noise)
        agreement, shown, plain = factor_cost(store, noise, universe)
        rows.append(f"| {market} | {noise:g} | {shares['scale-free']:.0%} | {shares['scale-free at T0']:.0%} | ")
        rows[-1] += f"{max(v for k, v in shares.items() if not k.startswith('scale-free')):.0%} | "
        rows[-1] += f"{agreement:.2f} | {shown:+.3f} (plain {plain:+.3f}) |"
        unknown_day = [share for name, share in shares.items() if not name.endswith("at T0")]
        guarded.append(noise < GUARDED_NOISE or max(unknown_day) <= IDENTIFIED_AT_MOST)
    print("\n" + "\n".join(rows))
    assert all(guarded), rows


def summary_lookup(store: MarketStore, universe: str) -> tuple[float, float]:
    """(share of DAYS x 3 random days whose market summary, as an anonymized prompt shows it, no other date of the
    data shows; the mean chance of naming the day by picking one of the dates that show it)."""
    from trade_data.summary import market_summary

    def shown(system: str) -> str:
        return system.split("## 市场状态")[1].split("\n", 1)[1].split("\n\n")[0]

    index = "SH000001"
    every = [
        market_summary(store.asof(d), index=index, universe=universe).to_text(coarse=True).split("\n", 1)[1]
        for d in store.dates[1:].astype(object)
    ]
    rng = np.random.default_rng(13)
    unique = picked = 0.0
    days = rng.choice(np.arange(60, len(store.dates)), size=3 * DAYS, replace=False)
    for t in days:
        task = day_task(store, store.dates[t].astype(object), pool_size=POOL, universe=universe, seed=int(t))
        system = Episode.start(task.model_copy(update={"anonymized": True}), store).messages()[0]["content"]
        matches = every.count(shown(system))
        unique += matches == 1
        picked += 1 / matches if matches else 0.0
    return unique / len(days), picked / len(days)


def test_the_market_summary_names_no_day(sample_store: MarketStore) -> None:
    """The summary's figures (上涨172/298家, a 20-day change to 0.01%) named every day among the 1,941 of the real
    sample; anonymized it shows three labels, which at most 5% of days show alone (measured: none)."""
    unique, picked = summary_lookup(sample_store, "csi300")
    print(f"\nmarket summary: {unique:.0%} of days named alone, a pick among the matching dates names {picked:.1%}")
    assert unique <= IDENTIFIED_AT_MOST, (unique, picked)


def test_a_cash_refusal_names_no_lot(synth_store: MarketStore) -> None:
    """ "约可买N单位" once named whole lots in units, so the units a lot is worth (the real price) read off one
    refusal; anonymized it names the units the cash is worth, which cash / shown price already says."""
    task = day_task(synth_store, synth_store.dates[40].astype(object), pool_size=POOL, seed=4)
    episode = Episode.start(task.model_copy(update={"anonymized": True}), synth_store)
    rules, affordable = episode.rules, re.compile(r"约可买([\d,.]+)单位")
    for symbol in task.pool:
        shown_price = episode.view.last_close(symbol) * (1 + rules.slippage) * episode.price_scale(symbol)
        units = math.ceil(episode.cash / shown_price) * 3
        answer = episode.call("TakeAction", {"type": "buy", "symbol": episode.aliases.symbols[symbol], "amount": units})  # type: ignore[union-attr]
        found = affordable.search(answer)
        assert found, answer
        worth = episode.cash / (shown_price * (1 + rules.commission_rate + rules.transfer_fee_rate))
        assert found[1] == f"{worth:,.2f}", answer
