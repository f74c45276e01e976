"""The synthetic China A-share market's model: daily bars, indices and universes from a seeded factor model.

Real bars cannot ship with the project, yet everything above the data layer (features, trading
environments, RL) must be exercised end to end on a market with the real one's frictions:
board-specific daily price limits, suspensions, ex-dividend adjustment factors, IPOs and index
membership that changes. Returns follow a market + sector + idiosyncratic factor model with
Student-t innovations and GARCH(1,1) variances, so fat tails and volatility clustering are there
too. Everything is vectorised over a days x symbols grid; only the path-dependent steps (the
variance recursion and the limit clipping against the previous close) loop, once per day.
Writing a market as a dataset (whole, or streamed in blocks of stocks) is :mod:`trade_data.synth`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from trade_core.errors import TradeError
from trade_core.params import iso_date
from trade_data.signals import PlantedSignal, rank_z
from trade_data.symbols import Board, board_of, limit_fractions

MIN_SYMBOLS, MAX_SYMBOLS = 10, 6000
"""Below 10 the universes and indices are degenerate; up to 6000 (the whole A-share market has about 5,500)
every code stays in its board's range."""
MIN_TRADING_DAYS = 20
MAX_CELLS = 10_000_000
"""Most trading days x symbols simulated at once: each days x symbols matrix is 80 MB at this size."""
BOARD_MIX = (("SH", 600000, 0.45), ("SZ", 1, 0.30), ("SZ", 300001, 0.15), ("SH", 688001, 0.10))
"""(exchange, first code, share of stocks): SH60/SZ00 main board, SZ300 ChiNext, SH688 STAR."""
INDEX_BASES = {"SH000001": 3300.0, "SH000300": 4000.0, "SH000905": 6000.0}
HOLIDAYS = (
    "01-01",
    *(f"02-{day:02d}" for day in range(10, 15)),
    *(f"05-{day:02d}" for day in range(1, 4)),
    *(f"10-{day:02d}" for day in range(1, 8)),
)
"""Fixed month-days off: New Year, a stand-in Spring Festival week, Labour Day, National Day."""
CSI300_MAX, CSI500_MAX = 300, 500


@dataclass(frozen=True)
class MarketModel:
    """The generator's knobs besides size, dates and seed; all of them are recorded in ``trade.json``."""

    sectors: int = 10
    market_vol: float = 0.012
    """Unconditional daily volatility of the market factor (about 19% a year)."""
    sector_vol: float = 0.008
    idio_vol: float = 0.016
    growth_board_vol: float = 1.25
    """Idiosyncratic volatility multiplier for ChiNext and STAR stocks."""
    garch_alpha: float = 0.08
    garch_beta: float = 0.90
    t_df: float = 5.0
    market_drift: float = 0.0001
    """Daily log drift of the market factor (about 2.5% a year)."""
    reversion_half_life_days: float = 500.0
    """Half-life of a stock's sector and own price deviations: keeps prices in a realistic band for years."""
    jump_prob: float = 0.002
    """Per stock-day chance of a news jump, which is what drives most limit-up/limit-down closes."""
    jump_size: tuple[float, float] = (0.04, 0.12)
    suspensions_per_year: float = 0.4
    suspension_mean_days: float = 4.0
    long_suspension_prob: float = 0.1
    long_suspension_days: tuple[int, int] = (20, 120)
    dividend_prob: float = 0.7
    """Chance that a stock goes ex-dividend in a given year (June to August)."""
    dividend_yield: tuple[float, float] = (0.005, 0.03)
    bonus_prob: float = 0.2
    bonus_ratios: tuple[float, ...] = (0.2, 0.3, 0.5, 1.0)
    ipo_fraction: float = 0.05
    turnover: float = 0.01
    """Median daily turnover as a fraction of float shares."""
    rank_window_days: int = 120
    min_listed_days: int = 60
    initial_price: tuple[float, float] = (12.0, 0.7)
    initial_float_cap: tuple[float, float] = (8e9, 1.0)
    """(median CNY, log-sd) of the lognormal starting prices and float caps."""


MODEL = MarketModel()


@dataclass
class SyntheticMarket:
    """A generated market: the long raw table, its calendar, universes, and what made it."""

    table: pd.DataFrame
    calendar: pd.DatetimeIndex
    universes: dict[str, pd.DataFrame]
    sectors: pd.Series
    """Sector number of each stock (index: symbol); the table itself has no sector column."""
    parameters: dict[str, object]


def checked_calendar(symbols: int, start: str | dt.date, end: str | dt.date, seed: int, cells: int) -> pd.DatetimeIndex:
    """The market's trading days, once every argument is checked (at most ``cells`` symbol-days)."""
    first, last = _parse_day(start, "start"), _parse_day(end, "end")
    if last < first:
        raise TradeError(f"end {last} is before start {first}", hint="pass an --end after --start")
    if not MIN_SYMBOLS <= symbols <= MAX_SYMBOLS:
        raise TradeError(
            f"--symbols {symbols} is out of range", hint=f"use {MIN_SYMBOLS} to {MAX_SYMBOLS}; the default is 300"
        )
    if seed < 0:
        raise TradeError(f"--seed {seed} is negative", hint="use a seed >= 0")
    calendar = trading_calendar(first, last)
    if len(calendar) < MIN_TRADING_DAYS:
        raise TradeError(
            f"{first}..{last} has only {len(calendar)} trading days",
            hint=f"choose dates at least {MIN_TRADING_DAYS} trading days apart",
        )
    if len(calendar) * symbols > cells:
        raise TradeError(
            f"{symbols} symbols x {len(calendar)} trading days is too large to simulate",
            hint=f"keep symbols x trading days under {cells:,}: fewer --symbols or a shorter range",
        )
    return calendar


def index_sizes(symbols: int) -> tuple[int, int]:
    """Members of csi300 and csi500 in a market of ``symbols`` stocks."""
    return min(CSI300_MAX, symbols // 2), min(CSI500_MAX, (symbols - symbols // 2) * 2 // 3)


def market_parameters(
    symbols: int, start: str | dt.date, end: str | dt.date, seed: int, signal: PlantedSignal | None, **extra: object
) -> dict[str, object]:
    """What made the market, for ``trade.json`` (the planted signal only where there is one, so a market
    without one records what it did before signals existed)."""
    csi300, csi500 = index_sizes(symbols)
    planted = {} if signal is None else {"signal": signal.model_dump()}
    return {
        "symbols": symbols,
        "start": _parse_day(start, "start").isoformat(),
        "end": _parse_day(end, "end").isoformat(),
        "seed": seed,
        "csi300_size": csi300,
        "csi500_size": csi500,
        "board_mix": [list(board) for board in BOARD_MIX],
        "holidays": list(HOLIDAYS),
        "index_bases": INDEX_BASES,
        **asdict(MODEL),
        **planted,
        **extra,
    }


def generate_market(
    symbols: int = 300,
    start: str | dt.date = "2018-01-01",
    end: str | dt.date = "2025-12-31",
    seed: int = 0,
    signal: PlantedSignal | None = None,
) -> SyntheticMarket:
    """Simulate ``symbols`` stocks plus SH000001/SH000300/SH000905 over weekdays from start to end, with
    ``signal`` planted in the stocks' next-day moves if given.

    The same arguments give the same market, bit for bit; without a signal, the market made before signals.
    """
    calendar = checked_calendar(symbols, start, end, seed, MAX_CELLS)
    rng = np.random.default_rng(seed)
    codes = stock_codes(symbols)
    stocks = simulate_stocks(rng, codes, calendar, signal=signal)
    csi300, csi500 = index_sizes(symbols)
    periods = rebalance_days(calendar)
    member300, member500 = rank_members(period_caps(stocks, periods), csi300, csi500)
    period_of_day = np.searchsorted(periods, np.arange(len(calendar)), side="right") - 1
    members = {"SH000001": stocks.listed, "SH000300": member300[period_of_day], "SH000905": member500[period_of_day]}
    indices = {code: index_bars(index_sums(stocks, member), INDEX_BASES[code]) for code, member in members.items()}
    return SyntheticMarket(
        table=long_table(stocks, indices, calendar),
        calendar=calendar,
        universes={
            "csi300": member_intervals(member300, periods, calendar, stocks.codes),
            "csi500": member_intervals(member500, periods, calendar, stocks.codes),
        },
        sectors=pd.Series(stocks.sector, index=pd.Index(stocks.codes, name="symbol"), name="sector"),
        parameters=market_parameters(symbols, start, end, seed, signal),
    )


def trading_calendar(start: dt.date, end: dt.date) -> pd.DatetimeIndex:
    """Weekdays from start to end minus the fixed :data:`HOLIDAYS`."""
    days = pd.bdate_range(start, end).as_unit("ns")
    return days[~days.strftime("%m-%d").isin(HOLIDAYS)]


def stock_codes(count: int) -> np.ndarray:
    """``count`` unique codes split ~45/30/15/10% over SH main, SZ main, ChiNext and STAR, sorted."""
    sizes = [round(count * share) for _, _, share in BOARD_MIX[1:]]
    sizes.insert(0, count - sum(sizes))
    codes = [
        f"{market}{first + i:06d}"
        for (market, first, _), size in zip(BOARD_MIX, sizes, strict=True)
        for i in range(size)
    ]
    return np.array(sorted(codes))


def _parse_day(value: str | dt.date, what: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return iso_date(str(value))
    except ValueError:
        raise TradeError(f"{what} date {value!r} is not YYYY-MM-DD", hint="e.g. 2018-01-01") from None


@dataclass
class Stocks:
    """Days x stocks matrices of the simulated stocks; prices are raw, NaN where there is no bar."""

    codes: np.ndarray
    sector: np.ndarray
    listed: np.ndarray
    traded: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    factor: np.ndarray
    cash: np.ndarray
    """Cash dividend as a fraction of the previous close on ex-dates: what a price index loses."""
    shares: np.ndarray
    listing: np.ndarray


def common_shocks(rng: np.random.Generator, days: int) -> np.ndarray:
    """Days x (1 + sectors) standardised Student-t shocks of the market and sector factors."""
    m = MODEL
    return rng.standard_t(m.t_df, (days, 1 + m.sectors)) / np.sqrt(m.t_df / (m.t_df - 2))


def simulate_stocks(
    rng: np.random.Generator,
    codes: np.ndarray,
    calendar: pd.DatetimeIndex,
    common: np.ndarray | None = None,
    signal: PlantedSignal | None = None,
) -> Stocks:
    """Simulate ``codes``; ``common`` (from :func:`common_shocks`) shares the market and sector factors
    between blocks of stocks simulated apart, else they are drawn with the stocks' own shocks."""
    m = MODEL
    days, count = len(calendar), len(codes)
    boards = np.array([board_of(code) for code in codes])
    sector = rng.integers(0, m.sectors, count)
    beta, gamma = rng.uniform(0.7, 1.3, count), rng.uniform(0.7, 1.3, count)
    growth = np.isin(boards, [Board.CHINEXT, Board.STAR])
    idio_vol = m.idio_vol * rng.lognormal(0.0, 0.2, count) * np.where(growth, m.growth_board_vol, 1.0)
    total_vol = np.sqrt((beta * m.market_vol) ** 2 + (gamma * m.sector_vol) ** 2 + idio_vol**2)

    vols = np.concatenate([[m.market_vol], np.full(m.sectors, m.sector_vol), idio_vol])
    if common is None:
        shocks = rng.standard_t(m.t_df, (days, vols.size)) / np.sqrt(m.t_df / (m.t_df - 2))
    else:
        shocks = np.hstack([common, rng.standard_t(m.t_df, (days, count)) / np.sqrt(m.t_df / (m.t_df - 2))])
    eps, sigma = _garch(shocks, vols, m.garch_alpha, m.garch_beta)
    jumps = (rng.random((days, count)) < m.jump_prob) * rng.choice([-1.0, 1.0], (days, count))
    jumps *= rng.uniform(*m.jump_size, (days, count))

    listing = np.zeros(count, dtype=int)
    ipos = rng.choice(count, max(1, round(m.ipo_fraction * count)), replace=False)
    listing[ipos] = rng.integers(days // 10, max(days // 10 + 1, 8 * days // 10), ipos.size)
    listed = np.arange(days)[:, None] >= listing
    traded = listed & ~_suspensions(rng, listing, days)
    ex, dividend_yield, bonus = _ex_dividends(rng, calendar, traded)

    price0 = np.clip(np.round(rng.lognormal(np.log(m.initial_price[0]), m.initial_price[1], count), 2), 2.0, 300.0)
    float_cap = rng.lognormal(np.log(m.initial_float_cap[0]), m.initial_float_cap[1], count)
    shares = np.round(float_cap / price0, -4) * np.cumprod(1.0 + bonus, axis=0)
    market = np.cumsum(m.market_drift + beta * eps[:, :1], axis=0)
    own = np.where(listed, gamma * eps[:, 1 : 1 + m.sectors][:, sector] + eps[:, 1 + m.sectors :] + jumps, 0.0)
    deviation = _mean_revert(own, np.log(2.0) / m.reversion_half_life_days)
    latent = np.log(price0) + market - market[listing, np.arange(count)] + deviation
    own_vol = np.sqrt((gamma * m.sector_vol) ** 2 + idio_vol**2)
    plant = None if signal is None else (signal, signal.strength() * own_vol)
    bars = _price_path(rng, latent, traded, total_vol, (ex, dividend_yield, bonus), _limits(codes, calendar), plant)
    opens, highs, lows, closes = (np.where(traded, bar, np.nan) for bar in bars[:4])
    factor, cash = bars[4:]

    adjusted = closes * factor
    returns = adjusted / _shift(_ffill(adjusted)) - 1.0
    debut = (np.arange(days)[:, None] == listing) & (listing > 0)
    activity = np.where(debut, 6.0, np.minimum(np.abs(np.nan_to_num(returns)) / total_vol, 6.0))
    regime = np.sqrt(sigma[:, :1] / m.market_vol)
    turnover = m.turnover * rng.lognormal(0.0, 0.5, count)
    volume = shares * turnover * regime * np.exp(0.35 * activity + rng.normal(0.0, 0.3, (days, count)) - 0.3)
    volume = np.where(traded, np.maximum(np.round(volume, -2), 100.0), 0.0)
    return Stocks(codes, sector, listed, traded, opens, highs, lows, closes, volume, factor, cash, shares, listing)


def _garch(shocks: np.ndarray, vols: np.ndarray, alpha: float, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """GARCH(1,1) series with unconditional daily volatility ``vols``: (returns, conditional volatility)."""
    omega = vols**2 * (1.0 - alpha - beta)
    variance = vols**2
    eps, sigma = np.empty_like(shocks), np.empty_like(shocks)
    for t in range(len(shocks)):
        sigma[t] = np.sqrt(variance)
        eps[t] = sigma[t] * shocks[t]
        variance = omega + alpha * eps[t] ** 2 + beta * variance
    return eps, sigma


def _mean_revert(moves: np.ndarray, rate: float) -> np.ndarray:
    """Running sum of daily log moves that decays by ``rate`` a day: an AR(1) log-price deviation."""
    level = np.zeros(moves.shape[1])
    deviation = np.empty_like(moves)
    for t in range(len(moves)):
        level = (1.0 - rate) * level + moves[t]
        deviation[t] = level
    return deviation


def _suspensions(rng: np.random.Generator, listing: np.ndarray, days: int) -> np.ndarray:
    """Runs of suspended days (mostly short, some months long) after each stock's listing day."""
    m = MODEL
    counts = rng.poisson(m.suspensions_per_year * days / 244, listing.size)
    owner = np.repeat(np.arange(listing.size), counts)
    begin = rng.integers(listing[owner] + 1, days)
    length = rng.geometric(1.0 / m.suspension_mean_days, owner.size)
    long = rng.random(owner.size) < m.long_suspension_prob
    length[long] = rng.integers(*m.long_suspension_days, long.sum())
    edges = np.zeros((days + 1, listing.size), dtype=int)
    np.add.at(edges, (begin, owner), 1)
    np.add.at(edges, (np.minimum(begin + length, days), owner), -1)
    return np.cumsum(edges[:-1], axis=0) > 0


def _ex_dividends(
    rng: np.random.Generator, calendar: pd.DatetimeIndex, traded: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At most one ex-date per stock and year, June to August, on a traded day after the first.

    Returns (ex-date mask, cash dividend as a fraction of the previous close, bonus shares per share).
    """
    m = MODEL
    count = traded.shape[1]
    ex = np.zeros(traded.shape, dtype=bool)
    summer = (calendar.month >= 6) & (calendar.month <= 8)
    for year in np.unique(calendar.year):
        window = np.flatnonzero(summer & (calendar.year == year))
        if window.size == 0:
            continue
        day = window[rng.integers(0, window.size, count)]
        pick = rng.random(count) < m.dividend_prob
        ex[day[pick], np.flatnonzero(pick)] = True
    ex &= traded & (np.cumsum(traded, axis=0) > 1)
    events = ex.sum()
    dividend_yield, bonus = np.zeros(traded.shape), np.zeros(traded.shape)
    dividend_yield[ex] = rng.uniform(*m.dividend_yield, events)
    bonus[ex] = np.where(rng.random(events) < m.bonus_prob, rng.choice(m.bonus_ratios, events), 0.0)
    return ex, dividend_yield, bonus


def _limits(codes: np.ndarray, calendar: pd.DatetimeIndex) -> np.ndarray:
    """Days x stocks daily limit fractions from the price-limit table."""
    return limit_fractions(list(codes), calendar.date)


def _price_path(
    rng: np.random.Generator,
    latent: np.ndarray,
    traded: np.ndarray,
    total_vol: np.ndarray,
    dividends: tuple[np.ndarray, np.ndarray, np.ndarray],
    limits: np.ndarray,
    plant: tuple[PlantedSignal, np.ndarray] | None = None,
) -> tuple[np.ndarray, ...]:
    """Raw OHLC that track the latent adjusted price within each day's price limits.

    The limits come from the previous raw close (on ex-dates from the ex-rights reference price,
    as the exchanges do), so a close beyond them is clipped to the limit price and the rest of the
    move follows on later days, like a run of limit-up days. On an ex-date the factor rises by
    previous close / reference price, which keeps the adjusted series free of the dividend gap.
    Returns (open, high, low, close, factor, cash) for every day; untraded days are filled in too
    and masked by the caller, the previous close only moves on traded days.

    ``plant`` (signal, move per unit z-score of each stock) adds to each stock's log price, from the next
    day on, its move times the rank z-score of the signal on the day's bars (traded stocks only). The move
    arrives whole in the next open, so the next day's own bars, and the signal on them, do not echo it.
    """
    ex, dividend_yield, bonus = dividends
    days, count = latent.shape
    open_noise = rng.normal(0.0, 0.3, latent.shape) * total_vol
    high_reach = np.abs(rng.normal(0.0, 0.5, latent.shape)) * total_vol
    low_reach = np.abs(rng.normal(0.0, 0.5, latent.shape)) * total_vol
    opens, highs, lows, closes = (np.empty(latent.shape) for _ in range(4))
    factor, cash = np.ones(latent.shape), np.zeros(latent.shape)
    previous, running_factor = np.full(count, np.nan), np.ones(count)
    planted, step = np.zeros(count), np.zeros(count)
    for t in range(days):
        reference = previous.copy()
        event = ex[t]
        if event.any():
            dividend = np.round(previous[event] * dividend_yield[t, event], 3)
            reference[event] = np.round((previous[event] - dividend) / (1.0 + bonus[t, event]), 2)
            running_factor[event] *= previous[event] / reference[event]
            cash[t, event] = dividend / previous[event]
        factor[t] = running_factor
        target = np.exp(latent[t] + planted) / running_factor
        first = np.isnan(reference)
        up = np.where(first, np.inf, np.round(reference * (1.0 + limits[t]), 2))
        down = np.where(first, 0.01, np.maximum(np.round(reference * (1.0 - limits[t]), 2), 0.01))
        close = np.clip(np.round(target, 2), down, up)
        base = np.where(first, close, reference)
        gap = 0.5 * (np.log(target / base) - step) + step
        opening = np.clip(np.round(base * np.exp(gap + open_noise[t]), 2), down, up)
        opens[t], closes[t] = opening, close
        highs[t] = np.minimum(np.round(np.maximum(opening, close) * np.exp(high_reach[t]), 2), up)
        lows[t] = np.maximum(np.round(np.minimum(opening, close) * np.exp(-low_reach[t]), 2), down)
        previous = np.where(traded[t], close, previous)
        if plant is not None:
            signal, move = plant
            today = signal.values((opens[t], highs[t], lows[t], closes[t]))
            step = move * rank_z(np.where(traded[t], today, np.nan))
            planted += step
    return opens, highs, lows, closes, factor, cash


def _ffill(values: np.ndarray) -> np.ndarray:
    """Carry each column's last non-NaN value forward over NaN (untraded) days."""
    rows = np.where(np.isnan(values), 0, np.arange(len(values))[:, None])
    np.maximum.accumulate(rows, axis=0, out=rows)
    return values[rows, np.arange(values.shape[1])]


def _shift(values: np.ndarray) -> np.ndarray:
    """The previous day's row (NaN on the first day)."""
    return np.vstack([np.full((1, values.shape[1]), np.nan), values[:-1]])


def rebalance_days(calendar: pd.DatetimeIndex) -> np.ndarray:
    """Day 0 and the first trading day after the second Friday of each June and December (CSI's reviews)."""
    days = {0}
    for year in range(calendar[0].year, calendar[-1].year + 1):
        for month in (6, 12):
            first = dt.date(year, month, 1)
            second_friday = first + dt.timedelta(days=(4 - first.weekday()) % 7 + 7)
            day = int(calendar.searchsorted(pd.Timestamp(second_friday), side="right"))
            if 0 < day < len(calendar):
                days.add(day)
    return np.array(sorted(days))


def period_caps(stocks: Stocks, periods: np.ndarray) -> np.ndarray:
    """Periods x stocks ranking key: mean float cap over a trailing window, -inf where not yet eligible.

    Like CSI's rules, stocks rank by their mean float cap over a trailing window, and an IPO is
    eligible only after a seasoning period.
    """
    m = MODEL
    cap = _ffill(stocks.close) * stocks.shares
    keys = np.empty((periods.size, cap.shape[1]))
    for period, day in enumerate(periods):
        window = cap[max(0, day - m.rank_window_days) : max(day, 1)]
        seen = ~np.isnan(window)
        mean = np.where(seen, window, 0.0).sum(axis=0) / np.maximum(seen.sum(axis=0), 1)
        eligible = seen.any(axis=0) & ((stocks.listing == 0) | (stocks.listing <= day - m.min_listed_days))
        keys[period] = np.where(eligible, mean, -np.inf)
    return keys


def rank_members(keys: np.ndarray, top: int, following: int) -> tuple[np.ndarray, np.ndarray]:
    """Periods x stocks membership of the ``top`` and the ``following`` stocks by :func:`period_caps`."""
    big = np.zeros(keys.shape, dtype=bool)
    small = np.zeros_like(big)
    for period, key in enumerate(keys):
        order = np.argsort(-key, kind="stable")
        big[period, order[:top]] = True
        small[period, order[top : top + following]] = True
    return big, small


def member_intervals(
    member: np.ndarray, periods: np.ndarray, calendar: pd.DatetimeIndex, codes: np.ndarray
) -> pd.DataFrame:
    """Periods x stocks membership -> ``symbol,start,end`` rows, one per uninterrupted run."""
    padding = np.zeros((1, member.shape[1]), dtype=np.int8)
    change = np.diff(np.vstack([padding, member.astype(np.int8), padding]), axis=0).T
    joined_symbol, joined_period = np.nonzero(change == 1)
    _, left_period = np.nonzero(change == -1)
    bounds = np.append(periods, len(calendar))
    return pd.DataFrame(
        {
            "symbol": codes[joined_symbol],
            "start": calendar[bounds[joined_period]],
            "end": calendar[bounds[left_period] - 1],
        }
    )


def index_sums(stocks: Stocks, member: np.ndarray) -> np.ndarray:
    """Per day sums over the members: float-cap weight, weight x move of open/high/low/close, volume.

    Sums of blocks of stocks add up to the market's, so a market simulated in blocks gets the same index.
    Each member's move is from its previous close; cash dividends lower the index, bonus shares do not
    (the divisor absorbs them). Suspended members count as unchanged.
    """
    previous = _shift(_ffill(stocks.close * stocks.factor))
    scale = stocks.factor * (1.0 - stocks.cash) / previous
    weight = np.where(member, np.nan_to_num(_shift(_ffill(stocks.close) * stocks.shares)), 0.0)
    counted = stocks.traded & (weight > 0)
    moves = [(weight * np.where(counted, prices * scale, 1.0)).sum(axis=1) for prices in _ohlc(stocks)]
    return np.stack([weight.sum(axis=1), *moves, np.where(member, stocks.volume, 0.0).sum(axis=1)])


def _ohlc(stocks: Stocks) -> tuple[np.ndarray, ...]:
    return stocks.open, stocks.high, stocks.low, stocks.close


def index_bars(sums: np.ndarray, base: float) -> dict[str, np.ndarray]:
    """A float-cap-weighted price index from :func:`index_sums`, starting at ``base``."""
    total = np.maximum(sums[0], 1.0)
    moved = sums[1:5] / total
    moved[:, 0] = 1.0
    close = base * np.cumprod(moved[3])
    before = np.concatenate([[base], close[:-1]])
    opening, high, low = before * moved[0], before * moved[1], before * moved[2]
    close, opening, high, low = (np.round(values, 2) for values in (close, opening, high, low))
    return {
        "open": opening,
        "high": np.maximum.reduce([high, opening, close]),
        "low": np.minimum.reduce([low, opening, close]),
        "close": close,
        "volume": sums[5],
    }


def long_table(stocks: Stocks, indices: dict[str, dict[str, np.ndarray]], calendar: pd.DatetimeIndex) -> pd.DataFrame:
    """Indices and traded stock-days as one long raw table, sorted by symbol and date."""
    mask = stocks.traded.T
    symbol, day = np.nonzero(mask)
    bars = pd.DataFrame(
        {
            "date": calendar[day],
            "symbol": stocks.codes[symbol],
            "open": stocks.open.T[mask],
            "high": stocks.high.T[mask],
            "low": stocks.low.T[mask],
            "close": stocks.close.T[mask],
            "volume": stocks.volume.T[mask],
            "factor": stocks.factor.T[mask],
        }
    )
    return pd.concat([index_table(indices, calendar), bars] if indices else [bars], ignore_index=True)


def index_table(indices: dict[str, dict[str, np.ndarray]], calendar: pd.DatetimeIndex) -> pd.DataFrame:
    """Index bars as a long raw table (factor 1), by code."""
    frames = [
        pd.DataFrame({"date": calendar, "symbol": code, **values, "factor": 1.0})
        for code, values in sorted(indices.items())
    ]
    return pd.concat(frames, ignore_index=True)
