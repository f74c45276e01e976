"""The synthetic market has the statistical facts and A-share frictions it promises, and writes as SYNTHETIC."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from trade_core.cli import build_cli
from trade_core.errors import TradeError
from trade_core.plugins import get_manager
from trade_data.market_model import INDEX_BASES, SyntheticMarket, generate_market
from trade_data.qlib_dir import read_meta, read_table_back, read_universe
from trade_data.symbols import CHINEXT_20PCT_FROM, Board, board_of, is_valid_symbol
from trade_data.synth import STREAM_BLOCK, write_synthetic_market
from trade_data.table import validate_table

SYMBOLS = 60
INDICES = sorted(INDEX_BASES)


@pytest.fixture(scope="module")
def market() -> SyntheticMarket:
    # Spans the ChiNext switch to 20% limits (2020-08-24) and several CSI rebalances.
    return generate_market(symbols=SYMBOLS, start="2019-01-01", end="2021-06-30", seed=7)


@pytest.fixture(scope="module")
def stocks(market: SyntheticMarket) -> pd.DataFrame:
    """Stock rows with the previous traded bar and that day's limit prices, as the generator must apply them."""
    frame = market.table[~market.table["symbol"].isin(INDICES)].sort_values(["symbol", "date"]).reset_index(drop=True)
    by_symbol = frame.groupby("symbol")
    frame["prev_close"] = by_symbol["close"].shift()
    frame["prev_factor"] = by_symbol["factor"].shift()
    frame["adj_return"] = frame["close"] * frame["factor"] / (frame["prev_close"] * frame["prev_factor"]) - 1.0
    # On an ex-date the limits apply to the ex-rights reference price, the previous close in today's terms.
    frame["reference"] = np.round(frame["prev_close"] * frame["prev_factor"] / frame["factor"], 2)
    boards = frame["symbol"].map(lambda symbol: board_of(symbol))
    chinext_wide = (boards == Board.CHINEXT) & (frame["date"] >= pd.Timestamp(CHINEXT_20PCT_FROM))
    frame["limit"] = np.where((boards == Board.STAR) | chinext_wide, 0.20, 0.10)
    frame["up"] = np.round(frame["reference"] * (1 + frame["limit"]), 2)
    frame["down"] = np.round(frame["reference"] * (1 - frame["limit"]), 2)
    return frame


@pytest.fixture(scope="module")
def returns(stocks: pd.DataFrame) -> pd.DataFrame:
    """Dates x symbols adjusted log returns (NaN on untraded days and each stock's first day)."""
    return np.log1p(stocks.pivot(index="date", columns="symbol", values="adj_return"))


def _kurtosis(values: np.ndarray) -> float:
    centred = values[~np.isnan(values)] - np.nanmean(values)
    return float((centred**4).mean() / (centred**2).mean() ** 2)


def _lag1_autocorrelation(values: np.ndarray) -> float:
    series = values[~np.isnan(values)]
    centred = series - series.mean()
    return float((centred[1:] * centred[:-1]).mean() / (centred**2).mean())


def test_table_is_valid_and_sorted(market: SyntheticMarket) -> None:
    table = market.table
    assert list(table.columns) == ["date", "symbol", "open", "high", "low", "close", "volume", "factor"]
    pd.testing.assert_frame_equal(validate_table(table, calendar=market.calendar), table, check_dtype=False)
    assert set(table["date"]) <= set(market.calendar)


def test_calendar_is_weekdays_without_fixed_holidays(market: SyntheticMarket) -> None:
    assert (market.calendar.day_of_week < 5).all()
    assert pd.Timestamp("2020-10-01") not in market.calendar and pd.Timestamp("2020-01-01") not in market.calendar
    assert pd.Timestamp("2020-10-09") in market.calendar
    assert market.calendar[0] == pd.Timestamp("2019-01-02") and market.calendar[-1] == pd.Timestamp("2021-06-30")


def test_boards_mix_by_code(market: SyntheticMarket) -> None:
    symbols = [s for s in market.table["symbol"].unique() if s not in INDICES]
    assert len(symbols) == len(set(symbols)) == SYMBOLS and all(is_valid_symbol(s) for s in symbols)
    counts = pd.Series([s[:5] for s in symbols]).value_counts()
    assert counts["SH600"] == 27 and counts["SZ000"] == 18 and counts["SZ300"] == 9 and counts["SH688"] == 6


def test_returns_have_fat_tails_and_volatility_clustering(returns: pd.DataFrame) -> None:
    kurtosis = [_kurtosis(returns[s].to_numpy()) for s in returns]
    clustering = [_lag1_autocorrelation(np.abs(returns[s].to_numpy())) for s in returns]
    assert np.mean(kurtosis) > 4 and np.median(kurtosis) > 3
    assert np.mean(clustering) > 0.03


def test_stocks_in_a_sector_move_together_more_than_across_sectors(
    market: SyntheticMarket, returns: pd.DataFrame
) -> None:
    correlation = returns.corr().to_numpy()
    sector = market.sectors.reindex(returns.columns).to_numpy()
    same = sector[:, None] == sector[None, :]
    off_diagonal = ~np.eye(len(sector), dtype=bool)
    within, across = correlation[same & off_diagonal].mean(), correlation[~same].mean()
    assert across > 0.1  # the market factor
    assert within > across + 0.05


def test_closes_respect_daily_limits_and_some_hit_them(stocks: pd.DataFrame) -> None:
    rows = stocks[stocks["prev_close"].notna()]
    assert (rows["close"] <= rows["up"] + 1e-9).all() and (rows["close"] >= rows["down"] - 1e-9).all()
    assert (rows["high"] <= rows["up"] + 1e-9).all() and (rows["low"] >= rows["down"] - 1e-9).all()
    assert np.isclose(rows["close"], rows["up"]).sum() >= 10
    assert np.isclose(rows["close"], rows["down"]).sum() >= 5
    chinext_wide = rows[(rows["limit"] == 0.20) & rows["symbol"].str.startswith("SZ30")]
    assert len(chinext_wide) and (chinext_wide["adj_return"].abs() > 0.1005).any()  # moves only 20% limits allow


def test_prices_are_cents_and_ohlc_consistent(market: SyntheticMarket, stocks: pd.DataFrame) -> None:
    table = market.table
    assert (table[["open", "high", "low", "close"]] > 0).all().all()
    assert (table["low"] <= table[["open", "close"]].min(axis=1)).all()
    assert (table["high"] >= table[["open", "close"]].max(axis=1)).all()
    cents = stocks[["open", "high", "low", "close"]].to_numpy() * 100
    np.testing.assert_allclose(cents, np.round(cents), atol=1e-6)


def test_volume_is_positive_and_follows_absolute_returns(stocks: pd.DataFrame) -> None:
    assert (stocks["volume"] > 0).all()
    rows = stocks[stocks["prev_close"].notna()]
    correlation = rows.groupby("symbol").apply(
        lambda g: np.corrcoef(g["adj_return"].abs(), np.log(g["volume"]))[0, 1], include_groups=False
    )
    assert correlation.mean() > 0.2


def test_suspended_days_have_no_row(market: SyntheticMarket, stocks: pd.DataFrame) -> None:
    spans = stocks.groupby("symbol")["date"].agg(["min", "max", "size"])
    calendar = market.calendar
    in_span = [
        int(((calendar >= first) & (calendar <= last)).sum()) for first, last, _ in spans.itertuples(index=False)
    ]
    missing = np.array(in_span) - spans["size"].to_numpy()
    assert (missing > 0).sum() >= 5
    assert missing.max() >= 5  # runs of days, not only single days


def test_ex_dividend_days_step_the_factor_and_keep_adjusted_prices_continuous(stocks: pd.DataFrame) -> None:
    first_rows = stocks.groupby("symbol").head(1)
    assert (first_rows["factor"] == 1.0).all()
    rows = stocks[stocks["prev_close"].notna()]
    assert (rows["factor"] >= rows["prev_factor"]).all()
    ex = rows[rows["factor"] > rows["prev_factor"]]
    assert ex["symbol"].nunique() >= SYMBOLS // 2 and len(ex) >= SYMBOLS
    raw_return = ex["close"] / ex["prev_close"] - 1.0
    assert (raw_return < ex["adj_return"]).all()  # the raw price drops by the dividend or bonus shares
    assert raw_return.mean() < ex["adj_return"].mean() - 0.01
    # The adjusted return is an ordinary one: inside the day's limits and like other days on average.
    assert (ex["adj_return"].abs() <= ex["limit"] + 0.005).all()
    assert abs(ex["adj_return"].mean() - rows["adj_return"].mean()) < 0.01


def test_some_stocks_list_after_the_start(market: SyntheticMarket, stocks: pd.DataFrame) -> None:
    first_days = stocks.groupby("symbol")["date"].min()
    late = first_days[first_days > market.calendar[0]]
    assert len(late) == 3
    assert (late < market.calendar[-1]).all()


def test_indices_are_cap_weighted_rows_of_the_table(market: SyntheticMarket, stocks: pd.DataFrame) -> None:
    indices = market.table[market.table["symbol"].isin(INDICES)]
    assert (indices["factor"] == 1.0).all()
    assert (indices.groupby("symbol").size() == len(market.calendar)).all()
    first = indices[indices["date"] == market.calendar[0]].set_index("symbol")["close"]
    assert first.to_dict() == INDEX_BASES
    closes = indices.pivot(index="date", columns="symbol", values="close")
    index_returns = np.log(closes).diff()
    assert all(_kurtosis(index_returns[s].to_numpy()) > 3 for s in INDICES)
    assert all(_lag1_autocorrelation(np.abs(index_returns[s].to_numpy())) > 0 for s in INDICES)
    # The all-stock index follows the stocks' average move and carries all of their volume.
    equal_weight = np.log1p(stocks.groupby("date")["adj_return"].mean())
    assert index_returns["SH000001"].corr(equal_weight) > 0.8
    np.testing.assert_allclose(
        indices[indices["symbol"] == "SH000001"].set_index("date")["volume"],
        stocks.groupby("date")["volume"].sum(),
    )


def test_csi300_volume_sums_its_members(market: SyntheticMarket, stocks: pd.DataFrame) -> None:
    members = market.universes["csi300"]
    day = market.calendar[len(market.calendar) // 2]
    current = members[(members["start"] <= day) & (members["end"] >= day)]["symbol"]
    expected = stocks[(stocks["date"] == day) & stocks["symbol"].isin(current)]["volume"].sum()
    table = market.table
    assert table[(table["symbol"] == "SH000300") & (table["date"] == day)]["volume"].item() == pytest.approx(expected)


@pytest.mark.parametrize(("name", "size"), [("csi300", SYMBOLS // 2), ("csi500", 20)])
def test_universes_rebalance_with_a_fixed_member_count(market: SyntheticMarket, name: str, size: int) -> None:
    members = market.universes[name]
    assert list(members.columns) == ["symbol", "start", "end"]
    counts = [int(((members["start"] <= day) & (members["end"] >= day)).sum()) for day in market.calendar]
    assert set(counts) == {size}
    assert members["symbol"].nunique() > size  # membership changes
    changes = set(members["start"]) - {market.calendar[0]}
    assert changes and {day.month for day in changes} <= {6, 12}


def test_csi300_holds_the_largest_caps(market: SyntheticMarket, stocks: pd.DataFrame) -> None:
    members = set(market.universes["csi300"].query("start == @market.calendar[0]")["symbol"])
    first_day = stocks[stocks["date"] == market.calendar[0]]
    value_traded = first_day.set_index("symbol")["close"] * first_day.set_index("symbol")["volume"]
    # Turnover is a fraction of float shares, so big caps trade more value on average.
    assert value_traded[list(members)].median() > value_traded.drop(list(members)).median()


def test_same_seed_same_market_and_another_seed_differs() -> None:
    first = generate_market(symbols=12, start="2020-01-01", end="2020-12-31", seed=3)
    again = generate_market(symbols=12, start="2020-01-01", end="2020-12-31", seed=3)
    other = generate_market(symbols=12, start="2020-01-01", end="2020-12-31", seed=4)
    pd.testing.assert_frame_equal(first.table, again.table)
    for name in first.universes:
        pd.testing.assert_frame_equal(first.universes[name], again.universes[name])
    assert not first.table["close"].equals(other.table["close"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": "2021-01-01", "end": "2020-01-01"}, "before start"),
        ({"symbols": 5}, "out of range"),
        ({"start": "01/02/2020"}, "not YYYY-MM-DD"),
        ({"start": "2020-01-01", "end": "2020-01-10"}, "trading days"),
        ({"symbols": 5000, "start": "1990-01-01", "end": "2020-12-31"}, "too large"),
    ],
)
def test_bad_arguments_raise_trade_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TradeError, match=message):
        generate_market(**kwargs)  # type: ignore[arg-type]


def _trade(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(get_manager()), list(args))
    return result.exit_code, result.output


def test_cli_writes_a_synthetic_dataset_and_info_says_so(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    args = ["data", "synth", "--out", str(out), "--symbols", "20", "--start", "2020-01-01", "--end", "2020-12-31"]
    code, output = _trade(*args, "--seed", "5")
    assert code == 0, output
    assert "SYNTHETIC" in output
    meta = read_meta(out)
    assert meta.synthetic and meta.source == "synth"
    assert (
        meta.parameters["seed"] == 5 and meta.parameters["symbols"] == 20 and meta.parameters["start"] == "2020-01-01"
    )
    market = generate_market(symbols=20, start="2020-01-01", end="2020-12-31", seed=5)
    back = read_table_back(out).sort_values(["symbol", "date"]).reset_index(drop=True)
    assert len(back) == len(market.table)
    np.testing.assert_allclose(back["close"], market.table["close"], rtol=1e-5)
    pd.testing.assert_frame_equal(read_universe(out, "csi300"), market.universes["csi300"], check_dtype=False)
    code, output = _trade("data", "info", str(out))
    assert code == 0 and "SYNTHETIC" in output
    code, output = _trade(*args, "--seed", "6")  # a synthetic dataset may be replaced
    assert code == 0, output
    assert read_meta(out).parameters["seed"] == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "2021-01-01", "--end", "2020-01-01"], "before start"),
        (["--symbols", "9"], "out of range"),
        (["--start", "2020.01.01"], "is not a date YYYY-MM-DD"),
    ],
)
def test_cli_bad_arguments_give_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    code, output = _trade("data", "synth", "--out", str(tmp_path / "synth"), *args)
    assert code == 2
    assert output.startswith("error: ") and message in output and output.count("\n") == 1
    assert not (tmp_path / "synth").exists()


def test_cli_refuses_a_foreign_folder_and_real_data(tmp_path: Path) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me\n")
    code, output = _trade("data", "synth", "--out", str(foreign), "--symbols", "10")
    assert code == 2 and output.startswith("error: ") and "not a trade-agent dataset" in output
    assert (foreign / "todo.txt").read_text() == "keep me\n"
    real = tmp_path / "real"  # a Qlib dir without trade.json counts as real data
    (real / "calendars").mkdir(parents=True)
    (real / "instruments").mkdir()
    (real / "calendars" / "day.txt").write_text("2020-01-02\n")
    (real / "instruments" / "all.txt").write_text("SH600000\t2020-01-02\t2020-01-02\n")
    with pytest.raises(TradeError, match="real market data"):
        write_synthetic_market(real, symbols=10, start=dt.date(2020, 1, 1), end=dt.date(2020, 6, 30))


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("streamed") / "m"
    return write_synthetic_market(out, symbols=600, start="2020-01-01", end="2021-06-30", seed=2, stream=True)


def test_a_market_streamed_in_blocks_is_one_market(streamed: Path) -> None:
    from trade_data.store import MarketStore

    store = MarketStore.load(streamed)
    assert len(store.symbols) == 603 and read_meta(streamed).parameters["stream_block"] == STREAM_BLOCK
    last = store.asof(store.calendar[-1])
    assert (len(last.members("csi300")), len(last.members("csi500"))) == (300, 200)
    returns = pd.DataFrame(store.adjusted["close"], columns=store.symbols).pct_change(fill_method=None)
    first_block, last_block = returns.iloc[:, 3:203], returns.iloc[:, -200:]  # simulated apart
    across = first_block.corrwith(last_block.set_axis(first_block.columns, axis=1)).mean()
    assert across > 0.1  # the market factor is shared between blocks
    members = store.membership("csi300")
    weights = np.where(members & store.traded, np.nan_to_num(store.previous_close), 0.0)
    mean_move = (np.nan_to_num(returns.to_numpy()) * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    index_move = returns["SH000300"].to_numpy()
    assert np.corrcoef(mean_move[1:], index_move[1:])[0, 1] > 0.9  # the index weighs members of every block


def test_streamed_markets_are_reproducible(streamed: Path, tmp_path: Path) -> None:
    again = write_synthetic_market(
        tmp_path / "m", symbols=600, start="2020-01-01", end="2021-06-30", seed=2, stream=True
    )
    for name in ("close", "volume", "factor"):
        for symbol in ("sh600000", "sh000300", "sz300001"):
            path = Path("features") / symbol / f"{name}.day.bin"
            assert (again / path).read_bytes() == (streamed / path).read_bytes()


def test_a_market_over_the_streamed_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TradeError, match="too large"):
        write_synthetic_market(tmp_path / "m", symbols=6000, start="1990-01-01", end="2020-12-31")
    assert not (tmp_path / "m").exists()
