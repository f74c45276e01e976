"""A planted signal gives the synthetic market the edge it promises, and only that: the rank IC with the next
day's return lands on the target, arrives in the next open, is recorded where the data is described, and a market
without one is the market made before signals existed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from trade_core.cli import build_cli
from trade_core.errors import TradeError
from trade_core.plugins import get_manager
from trade_data.columns import raw_prices
from trade_data.info import dataset_info
from trade_data.market_model import INDEX_BASES, SyntheticMarket, generate_market, stock_codes
from trade_data.qlib_dir import read_meta
from trade_data.signals import SIGNALS, PlantedSignal, describe_dataset, planted_signal, rank_z
from trade_data.store import MarketStore
from trade_data.synth import STREAM_BLOCK, write_synthetic_market

SIZE = {"symbols": 100, "start": "2020-01-01", "end": "2021-06-30", "seed": 1}
"""100 stocks over 18 months: ~360 daily ICs, a standard error of ~0.006 on their mean."""
CALIBRATION_SLACK = 0.1
"""How far (a fraction of the target) the realised mean rank IC may sit from the target besides sampling error:
the strength is one constant fitted over ICs and pool sizes (signals.RANK_CALIBRATION); over 8 seeds it lands
at ~0.94x the target (0.093 / 0.187 / 0.283 for 0.1 / 0.2 / 0.3)."""
PRE_SIGNAL_DIGEST = "aea4715a8c863b32"
"""sha256 of the OHLC cents of ``generate_market(12, "2020-01-01", "2020-12-31", seed=3)`` as the generator made it
before signals were added (git HEAD's synth.py, run beside this one: identical tables). A numpy release that changes
``Generator`` streams changes it too."""


def _bars(market: SyntheticMarket) -> dict[str, np.ndarray]:
    """The stocks' raw open/high/low/close and adjusted close as [day, stock] arrays (NaN where untraded)."""
    stocks = market.table[~market.table["symbol"].isin(list(INDEX_BASES))]
    wide = {f: stocks.pivot(index="date", columns="symbol", values=f) for f in ("open", "high", "low", "close")}
    factor = stocks.pivot(index="date", columns="symbol", values="factor")
    arrays = {name: frame.to_numpy() for name, frame in wide.items()}
    arrays["adjusted_close"] = (wide["close"] * factor).to_numpy()
    arrays["adjusted_open"] = (wide["open"] * factor).to_numpy()
    return arrays


def _signal(name: str, bars: dict[str, np.ndarray]) -> np.ndarray:
    return SIGNALS[name](bars["open"], bars["high"], bars["low"], bars["close"])


def rank_ics(signal: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """Each day's Spearman correlation across stocks of ``signal`` and ``outcome`` (days with 10+ pairs)."""
    both = np.isfinite(signal) & np.isfinite(outcome)
    x = pd.DataFrame(np.where(both, signal, np.nan)).rank(axis=1)
    y = pd.DataFrame(np.where(both, outcome, np.nan)).rank(axis=1)
    x, y = x.sub(x.mean(axis=1), axis=0), y.sub(y.mean(axis=1), axis=0)
    ics = (x * y).sum(axis=1) / np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    return ics[both.sum(axis=1) >= 10].to_numpy()


def next_day_ics(name: str, bars: dict[str, np.ndarray]) -> np.ndarray:
    """Rank ICs of the signal on day t's bars with the adjusted close-to-close return from t to t+1."""
    close = bars["adjusted_close"]
    return rank_ics(_signal(name, bars)[:-1], close[1:] / close[:-1] - 1.0)


def mean_se(ics: np.ndarray) -> tuple[float, float]:
    return float(ics.mean()), float(ics.std(ddof=1) / np.sqrt(len(ics)))


def _market(signal: str | None = None, **size: object) -> SyntheticMarket:
    planted = None if signal is None else PlantedSignal.parse(signal)
    return generate_market(**{**SIZE, **size}, signal=planted)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def plain() -> dict[str, np.ndarray]:
    return _bars(_market())


# -- parsing ----------------------------------------------------------------------------------------------------


def test_parse_reads_name_and_ic() -> None:
    assert PlantedSignal.parse("KMID:0.2") == PlantedSignal(name="KMID", ic=0.2)
    assert PlantedSignal.parse(" ksft2 : 0.05") == PlantedSignal(name="KSFT2", ic=0.05)
    assert PlantedSignal.parse("KLEN:0.9").describe() == "planted signal KLEN, IC 0.9"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("BAD", "unknown signal 'BAD'"),
        ("ROC20:0.2", "unknown signal 'ROC20'"),  # an Alpha158 factor, but not a one-bar K-line one
        ("KMID", "has no IC"),
        ("KMID:", "has no IC"),
        ("KMID:high", "has no IC"),
        ("KMID:0", "the IC must be in (0, 0.9]"),
        ("KMID:-0.2", "the IC must be in (0, 0.9]"),
        ("KMID:0.95", "the IC must be in (0, 0.9]"),
        ("KMID:nan", "the IC must be in (0, 0.9]"),
    ],
)
def test_parse_errors_are_one_line_trade_errors(text: str, message: str) -> None:
    with pytest.raises(TradeError) as raised:
        PlantedSignal.parse(text)
    error = raised.value
    assert message in error.message and repr(text) in error.message
    assert error.hint and "\n" not in str(error)
    if "unknown" in message:
        assert all(name in error.hint for name in SIGNALS)


def test_rank_z_is_a_unit_variance_uniform_of_the_ranks() -> None:
    """The score depends on the order only, so a limit day or a jump cannot dominate the planted move."""
    values = np.random.default_rng(0).standard_t(2, size=1000)
    z = rank_z(values)
    assert abs(z.mean()) < 1e-12 and z.var() == pytest.approx(1.0, rel=1e-5)
    assert (np.argsort(z) == np.argsort(values)).all()
    np.testing.assert_array_equal(rank_z(values**3), z)  # a monotone transform: the same score
    with_gaps = rank_z(np.array([3.0, np.nan, 1.0, np.inf, 2.0]))
    np.testing.assert_allclose(with_gaps, np.array([1, 0, -1, 0, 0]) * np.sqrt(12) / 3)
    np.testing.assert_array_equal(rank_z(np.array([np.nan, 5.0, np.nan])), np.zeros(3))


def test_describe_dataset_names_the_signal_of_synthetic_data_only() -> None:
    recorded = {"signal": {"name": "KMID", "ic": 0.2}}
    assert planted_signal(recorded) == PlantedSignal(name="KMID", ic=0.2) and planted_signal({}) is None
    assert describe_dataset(True, recorded) == "synthetic, planted signal KMID, IC 0.2"
    assert describe_dataset(True, {"seed": 0}) == "synthetic"
    assert describe_dataset(False, recorded) == "real market data"


# -- the market without and with a signal ---------------------------------------------------------------------------


def test_without_a_signal_the_market_is_the_one_made_before_signals() -> None:
    args = {"symbols": 12, "start": "2020-01-01", "end": "2020-12-31", "seed": 3}
    market, none = generate_market(**args), generate_market(**args, signal=None)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(none.table, market.table)
    for name in market.universes:
        pd.testing.assert_frame_equal(none.universes[name], market.universes[name])
    assert none.parameters == market.parameters and "signal" not in market.parameters
    cents = np.round(market.table[["open", "high", "low", "close"]].to_numpy() * 100).astype(np.int64)
    assert hashlib.sha256(cents.tobytes()).hexdigest()[:16] == PRE_SIGNAL_DIGEST


def test_a_signal_moves_prices_from_the_second_day_and_draws_nothing() -> None:
    """The plant uses no randomness (the same suspensions, listings and first day) and acts on the next day."""
    plain, planted = _market(symbols=40, end="2020-12-31"), _market("KMID:0.3", symbols=40, end="2020-12-31")
    assert planted.parameters == {**plain.parameters, "signal": {"name": "KMID", "ic": 0.3}}
    keys = ["date", "symbol"]
    pd.testing.assert_frame_equal(planted.table[keys], plain.table[keys])
    first = plain.table["date"] == plain.calendar[0]
    pd.testing.assert_frame_equal(planted.table[first], plain.table[first])
    later = planted.table["date"] == plain.calendar[1]
    assert (planted.table.loc[later, "close"] != plain.table.loc[later, "close"]).mean() > 0.5


@pytest.mark.parametrize(("name", "ic"), [("KMID", 0.1), ("KMID", 0.2), ("KMID", 0.3), ("KSFT2", 0.2)])
def test_the_realised_rank_ic_lands_on_the_target(name: str, ic: float) -> None:
    mean, se = mean_se(next_day_ics(name, _bars(_market(f"{name}:{ic}"))))
    assert abs(mean - ic) < CALIBRATION_SLACK * ic + 3 * se, (mean, se)
    assert mean / se > 5


def test_without_a_signal_no_factor_predicts_the_next_day(plain: dict[str, np.ndarray]) -> None:
    for name in SIGNALS:
        mean, se = mean_se(next_day_ics(name, plain))
        assert abs(mean) < 3 * se, (name, mean, se)


def test_the_planted_move_arrives_in_the_next_open(plain: dict[str, np.ndarray]) -> None:
    """Overnight, not intraday: the next day's own bars (and the signal on them) do not echo the move."""
    bars = _bars(_market("KMID:0.3"))
    signal = _signal("KMID", bars)[:-1]
    gap = bars["adjusted_open"][1:] / bars["adjusted_close"][:-1] - 1.0
    intraday = bars["close"][1:] / bars["open"][1:] - 1.0
    assert mean_se(rank_ics(signal, gap))[0] > 0.3
    mean, se = mean_se(rank_ics(signal, intraday))
    assert abs(mean) < 3 * se, (mean, se)
    echo, before = (mean_se(rank_ics(s[:-1], s[1:]))[0] for s in (_signal("KMID", bars), _signal("KMID", plain)))
    assert abs(echo - before) < 0.02, (echo, before)


# -- where the signal is recorded -------------------------------------------------------------------------------


def test_trade_json_info_and_the_store_record_the_signal(tmp_path: Path) -> None:
    size = {"symbols": 20, "start": "2020-01-01", "end": "2020-06-30"}
    out = write_synthetic_market(tmp_path / "s", **size, signal=PlantedSignal(name="KMID", ic=0.2))  # type: ignore[arg-type]
    assert read_meta(out).parameters["signal"] == {"name": "KMID", "ic": 0.2}
    info = dataset_info(out)
    assert info.description == "synthetic, planted signal KMID, IC 0.2"
    assert "[SYNTHETIC market (not real data); planted signal KMID, IC 0.2; source: synth]" in info.to_text()
    assert MarketStore.load(out).planted_signal == "KMID"
    plain = write_synthetic_market(tmp_path / "p", **size)  # type: ignore[arg-type]
    assert "signal" not in read_meta(plain).parameters and MarketStore.load(plain).planted_signal is None
    assert dataset_info(plain).description == "synthetic" and "planted" not in dataset_info(plain).to_text()


def _trade(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_cli(get_manager()), list(args))
    return result.exit_code, result.output


def test_cli_plants_a_signal_and_info_shows_it(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    code, output = _trade(
        "data",
        "synth",
        "--out",
        str(out),
        "--symbols",
        "20",
        "--start",
        "2020-01-01",
        "--end",
        "2020-06-30",
        "--signal",
        "kmid:0.2",
    )
    assert code == 0, output
    assert "planted signal KMID, IC 0.2" in output
    assert read_meta(out).parameters["signal"] == {"name": "KMID", "ic": 0.2}
    code, output = _trade("data", "info", str(out))
    assert code == 0 and "planted signal KMID, IC 0.2" in output, output
    code, output = _trade("data", "info", str(out), "--json")
    assert code == 0 and json.loads(output)["description"] == "synthetic, planted signal KMID, IC 0.2"


@pytest.mark.parametrize(
    ("value", "message"), [("BAD", "unknown signal"), ("KMID", "has no IC"), ("KMID:2", "(0, 0.9]")]
)
def test_cli_bad_signal_is_one_line_and_writes_nothing(tmp_path: Path, value: str, message: str) -> None:
    code, output = _trade("data", "synth", "--out", str(tmp_path / "synth"), "--symbols", "20", "--signal", value)
    assert code == 2
    assert output.startswith("error: ") and message in output and output.count("\n") == 1, output
    assert not (tmp_path / "synth").exists()


def test_a_streamed_market_plants_the_signal_too(tmp_path: Path) -> None:
    """Written in blocks of 250 stocks, each ranked within its block: the whole market's IC is still about the
    target, and the last, short block carries it too."""
    planted = PlantedSignal(name="KMID", ic=0.3)
    out = write_synthetic_market(tmp_path / "m", 300, "2020-01-01", "2020-12-31", seed=2, signal=planted, stream=True)
    parameters = read_meta(out).parameters
    assert parameters["stream_block"] == STREAM_BLOCK < 300 and parameters["signal"] == planted.model_dump()
    store = MarketStore.load(out)
    assert store.planted_signal == "KMID"
    codes = stock_codes(300)  # simulated in this order, a block of STREAM_BLOCK at a time

    def store_bars(symbols: np.ndarray) -> dict[str, np.ndarray]:
        columns = [store.column[s] for s in symbols]
        traded = store.traded[:, columns]
        bars = {
            name: np.where(traded, raw_prices(store.adjusted[name][:, columns], store.factor[:, columns], True), np.nan)
            for name in ("open", "high", "low", "close")
        }
        return {**bars, "adjusted_close": np.where(traded, store.adjusted["close"][:, columns], np.nan)}

    mean, se = mean_se(next_day_ics("KMID", store_bars(codes)))
    assert abs(mean - planted.ic) < CALIBRATION_SLACK * planted.ic + 3 * se, (mean, se)
    for block in (codes[:STREAM_BLOCK], codes[STREAM_BLOCK:]):  # each block plants its own
        mean, se = mean_se(next_day_ics("KMID", store_bars(block)))
        assert mean > 0.5 * planted.ic and mean / se > 5, (len(block), mean, se)
