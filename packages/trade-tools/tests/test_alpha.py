"""The numpy engine against Qlib's own D.features, and the point-in-time guarantee, on real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from trade_data.qlib_dir import DatasetMeta, read_calendar, read_feature, write_dataset
from trade_data.store import MarketStore
from trade_tools.alpha import alpha158, columns_at, evaluate, resolve, value_at_t0
from trade_tools.expression import WINDOWED, ExpressionError, Node, ema_tail, lookback, parse_expression

pytestmark = pytest.mark.slow

T0S = ("2019-06-28", "2021-11-15", "2024-06-14")
RTOL, ATOL = 1e-4, 1e-6  # Qlib computes in float32
CUSTOM = [
    "Mean($close, 5)/Mean($close, 20) - 1",
    "EMA($close, 12)/EMA($close, 26)",
    "EMA($volume, 5)/Mean($volume, 20)",
    "EMA(Mean($close, 5), 3)/$close",
    "WMA($close, 10)/$close",
    "WMA($volume, 7)",
    "Corr($close/Ref($close, 1), $volume/Ref($volume, 1), 20)",
    "Cov($close/Ref($close, 1), $volume/Mean($volume, 10), 10)",
    "Quantile($high - $low, 30, 0.25)",
    "Le($close, Quantile($close, 60, 0.1))",
    "Rank($volume, 20)",
    "If(Ge($volume, Mean($volume, 5)), Rank($close, 10), 0.5)",
    "If($close > $open, $volume, -1*$volume)",
    "Sum(If($close > Ref($close, 1), $volume, 0), 10)/Sum($volume, 10)",
    "($close > Mean($close, 20)) & ($volume > Mean($volume, 20))",
    "Or($close > Ref($close, 1), Eq($volume, 0))",
    "Not($close > $open)",
    "Power($close/Ref($close, 5), 2)",
    "($close/Ref($close, 1) - 1)**2",
    "Skew($close/Ref($close, 1), 20)",
    "Kurt($close/Ref($close, 1), 30)",
    "Skew($high, 3)",
    "Med($volume, 15)/Mean($volume, 15)",
    "Mad($close, 10)/$close",
    "Var(Log($close), 20)",
    "Delta($close, 5)/$close",
    "Count($close > Ref($close, 1), 10)",
    "Count(Ref($close, 3), 5)",
    "Sign(Delta($close, 1))*Abs(Log($volume + 1))",
    "Greater($high - $low, Abs($close - Ref($close, 1)))/$close",
    "Less($open, $close)/Greater($open, $close)",
    "Slope(Mean($close, 5), 10)/$close",
    "Rsquare(Log($volume + 1), 20)",
    "IdxMax($close, 20) - IdxMin($close, 20)",
    "IdxMin($low, 30)",
    "Std(Mean($close, 5), 10)/$close",
    "Max(Ref($close, 3), 10)/Min(Ref($low, 2), 10) - 1",
    "Sub(Add($close, $open), Mul(2, $low))/Div($close, Ref($close, 20))",
    "$close*0.5 + $open*0.5 >= $high - 0.001",
]


def _qlib_residue(name: str, ours: float, theirs: float) -> bool:
    """Qlib's one known garbage: on all-zero volume windows (suspensions stored as volume-0 rows) pandas'
    running Std keeps a rounding residue of earlier windows, which VSTD/WVMA divide by 0 + 1e-12."""
    return name[:4] in ("VSTD", "WVMA") and ours == 0 and abs(theirs) > 1e6


def _pool(store: MarketStore, t0: str) -> list[str]:
    """~10 symbols at T0: six CSI300 members trading through the last 61 days, up to two listed under
    60 days ago (partial windows), two with zero-volume suspension rows in the window, and the index."""
    t = store.day_index(t0)
    members = store.asof(t0).members("csi300")
    steady = [s for s in members if store.traded[t - 60 : t + 1, store.column[s]].all()]
    fresh = [s for j, s in enumerate(store.symbols) if 3 <= t - store.first_day[j] <= 55]
    suspended = [
        s
        for j, s in enumerate(store.symbols)
        if store.first_day[j] < t - 60 and store.traded[t, j] and not store.traded[t - 60 : t, j].all()
    ]
    return [*steady[:: max(1, len(steady) // 6)][:6], *fresh[:2], *suspended[:2], "SH000300"]


def _qlib_features(provider: Path, symbols: list[str], expressions: list[str], end: str) -> pd.DataFrame:
    """D.features from the dataset's first day, so Qlib's partial windows start where ours do."""
    import qlib
    from qlib.data import D

    qlib.init(provider_uri=str(provider), region="cn", kernels=1)
    first = read_calendar(provider)[0]
    return D.features(sorted(set(symbols)), expressions, start_time=first, end_time=end)


@pytest.fixture(scope="module")
def alpha_texts() -> dict[str, str]:
    """Alpha158's own expression strings (what Qlib is given), by factor name, without VWAP0."""
    pytest.importorskip("qlib", reason="the engine is checked against pyqlib (trade-data[qlib])")
    from qlib.contrib.data.loader import Alpha158DL

    fields, names = Alpha158DL.get_feature_config()
    return {name: text for text, name in zip(fields, names, strict=True) if name != "VWAP0"}


@pytest.fixture(scope="module")
def real_qlib(sample_dataset: Path, sample_store: MarketStore, alpha_texts: dict[str, str]) -> pd.DataFrame:
    """Qlib's values of every Alpha158 factor and custom expression for the pools of all T0s."""
    symbols = [s for t0 in T0S for s in _pool(sample_store, t0)]
    return _qlib_features(sample_dataset, symbols, [*alpha_texts.values(), *CUSTOM], max(T0S))


@pytest.fixture(scope="module")
def gapped(sample_table: pd.DataFrame, sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real bars of eight symbols (two listed late, one long suspended) with 6% of the days inside
    each symbol's span deleted: NaN gaps inside Qlib's series, which the real data does not have."""
    symbols = ["SH600519", "SZ000001", "SH601318", "SZ300750", "SH688187", "SH601728", "SZ000538", "SH000300"]
    table = sample_table[sample_table["symbol"].isin(symbols)].reset_index(drop=True)
    span = table.groupby("symbol")["date"].transform
    inside = (table["date"] > span("min")) & (table["date"] < span("max"))
    dropped = inside & (np.random.default_rng(7).random(len(table)) < 0.06)
    out = tmp_path_factory.mktemp("gapped") / "cn"
    return write_dataset(
        table[~dropped], out, meta=DatasetMeta(source="gapped"), calendar=read_calendar(sample_dataset)
    )


def _mismatches(
    store: MarketStore, t0: str, symbols: list[str], nodes: dict[str, Node], frame: pd.DataFrame
) -> list[tuple[str, str, float, float]]:
    """(name, symbol, ours, qlib) where value_at_t0 differs from Qlib's row at T0 beyond float32 noise."""
    columns = columns_at(store.asof(t0), symbols)
    rows = frame.xs(pd.Timestamp(t0), level="datetime").reindex(symbols)
    found = []
    for name, node in nodes.items():
        ours, theirs = value_at_t0(node, columns), rows[name].to_numpy(dtype=float)
        bad = ~np.isclose(ours, theirs, rtol=RTOL, atol=ATOL, equal_nan=True)
        found += [(name, symbols[j], ours[j], theirs[j]) for j in np.flatnonzero(bad)]
    return found


@pytest.mark.qlib
def test_alpha158_at_t0_equals_qlib(
    sample_store: MarketStore, real_qlib: pd.DataFrame, alpha_texts: dict[str, str]
) -> None:
    table = alpha158()
    assert list(table) == list(alpha_texts) and len(table) == 157
    frame = real_qlib.rename(columns={text: name for name, text in alpha_texts.items()})
    for t0 in T0S:
        pool = _pool(sample_store, t0)
        assert len(pool) >= 9
        assert _mismatches(sample_store, t0, pool, table, frame) == [], t0


@pytest.mark.qlib
def test_custom_expressions_at_t0_equal_qlib(sample_store: MarketStore, real_qlib: pd.DataFrame) -> None:
    nodes = {text: parse_expression(text) for text in CUSTOM}
    for t0 in T0S:
        assert _mismatches(sample_store, t0, _pool(sample_store, t0), nodes, real_qlib) == [], t0


@pytest.mark.qlib
def test_nan_gaps_match_qlib_on_every_day(gapped: Path, alpha_texts: dict[str, str]) -> None:
    """With gaps Qlib's NaN rules show: argmax picks a NaN, WMA/Rank/Corr skip them, comparisons count them."""
    store = MarketStore.load(gapped)
    texts = {**alpha_texts, **{text: text for text in CUSTOM}}
    nodes = {**alpha158(), **{text: parse_expression(text) for text in CUSTOM}}
    frame = _qlib_features(gapped, store.symbols, list(texts.values()), str(store.calendar[-1].date()))
    columns = columns_at(store.asof(store.calendar[-1]), store.symbols)
    for name, text in texts.items():
        ours = evaluate(nodes[name], columns)
        for j, symbol in enumerate(store.symbols):
            theirs = frame[text].xs(symbol, level="instrument")
            mine = ours[store.calendar.get_indexer(theirs.index), j]
            bad = ~np.isclose(mine, theirs.to_numpy(dtype=float), rtol=RTOL, atol=ATOL, equal_nan=True)
            residue = [_qlib_residue(name, a, b) for a, b in zip(mine[bad], theirs.to_numpy()[bad], strict=True)]
            assert all(residue), (name, symbol, theirs.index[bad][:3])


@pytest.mark.qlib
def test_lookback_is_qlib_window(real_qlib: pd.DataFrame, alpha_texts: dict[str, str]) -> None:
    """Our rows before T0 equal Qlib's left extension, except Delta (Qlib loads one row short) and EMA.

    (``real_qlib`` is asked for because it initialises Qlib, which registers the operators.)
    """
    from qlib.data.data import ExpressionD

    for text in [*alpha_texts.values(), *CUSTOM]:
        if "EMA" not in text and "Delta" not in text:
            assert (
                lookback(parse_expression(text))
                == ExpressionD.get_expression_instance(text).get_extended_window_size()[0]
            )


def test_columns_hold_qlib_bins(sample_store: MarketStore, sample_dataset: Path) -> None:
    pool = _pool(sample_store, T0S[1])
    view = sample_store.asof(T0S[1])
    columns = columns_at(view, pool)
    for j, symbol in enumerate(pool):
        for name, values in columns.items():
            start, stored = read_feature(sample_dataset, symbol, name)
            expected = np.full(view.index + 1, np.nan)
            expected[start : view.index + 1] = stored[: view.index + 1 - start]
            if name == "volume":  # the store keeps shares, so shares / factor may land one float32 step away
                np.testing.assert_allclose(values[:, j], expected, rtol=2.4e-7)
            else:
                np.testing.assert_array_equal(values[:, j], expected)


@pytest.mark.real_data
def test_trailing_columns_give_the_same_values(sample_store: MarketStore) -> None:
    """``columns_at(rows=lookback+1)`` is enough for the value at T0 (this data has no NaN gaps)."""
    for t0 in T0S:
        view, pool = sample_store.asof(t0), _pool(sample_store, t0)
        full = columns_at(view, pool)
        for node in alpha158().values():
            trailing = columns_at(view, pool, rows=lookback(node) + 1)
            np.testing.assert_array_equal(value_at_t0(node, trailing), value_at_t0(node, full))


def test_resolve_names_and_expressions() -> None:
    assert resolve(" kmid ") == ("KMID", alpha158()["KMID"])
    assert resolve("Rsqr60")[0] == "RSQR60"
    name, node = resolve("Mean($close, 5)/$close")
    assert name == "" and node == parse_expression("Mean($close,5)/$close")
    for text in ("VWAP0", "FOO1", "LABEL0"):
        with pytest.raises(ExpressionError):
            resolve(text)
    from trade_tools import alpha

    assert alpha.ALPHA158 is alpha158()


# Random accepted expressions: every operator, nested, with windows up to 15.
FIELD = st.sampled_from(["$open", "$high", "$low", "$close", "$volume"])
NUMBER = st.sampled_from(["0", "1", "2", "0.5", "1e-12", "-1", "100"])
WINDOW = st.integers(1, 15)


def _nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    side = st.one_of(inner, NUMBER)
    return st.one_of(
        st.builds("{}({})".format, st.sampled_from(["Abs", "Sign", "Log"]), inner),
        st.builds(
            "({}{}{})".format, inner, st.sampled_from(["+", "-", "*", "/", ">", ">=", "<", "<=", "==", "!="]), side
        ),
        st.builds("{}({}, {})".format, st.sampled_from(["Greater", "Less"]), inner, side),
        st.builds("Power({}, {})".format, inner, st.sampled_from(["2", "0.5", "-1", "3"])),
        st.builds("{}({}, {})".format, st.sampled_from(sorted(WINDOWED - {"Skew", "Kurt"})), inner, WINDOW),
        st.builds("{}({}, {})".format, st.sampled_from(["Skew", "Kurt"]), inner, st.integers(4, 15)),
        st.builds("Quantile({}, {}, {})".format, inner, WINDOW, st.sampled_from(["0.1", "0.5", "0.8"])),
        st.builds("{}({}, {}, {})".format, st.sampled_from(["Corr", "Cov"]), inner, inner, WINDOW),
        st.builds("If({} > {}, {}, {})".format, inner, side, inner, side),
        st.builds("Or(And({0} > {1}, Not({1} < 1)), {0} == 0)".format, inner, inner),
    )


TREES = st.recursive(FIELD, _nest, max_leaves=6)
SPAN = ("2021-06-01", 200)  # a window of the real data: a listing and suspensions fall inside


class _Columns(dict[str, np.ndarray]):
    """Columns with a one-line repr, for hypothesis' failure reports."""

    def __repr__(self) -> str:
        return f"<columns {list(self)} {next(iter(self.values())).shape}>"


@pytest.fixture(scope="module")
def span(sample_store: MarketStore) -> _Columns:
    """200 real rows for the pool of 2021-11-15 (a fresh listing, suspended stocks, the index)."""
    end = sample_store.day_index(SPAN[0]) + SPAN[1] - 1
    return _Columns(
        columns_at(sample_store.asof(sample_store.calendar[end]), _pool(sample_store, T0S[1]), rows=SPAN[1])
    )


def _parsed(text: str) -> Node:
    try:
        return parse_expression(text)
    except ExpressionError:
        reject()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TREES, t0=st.integers(0, SPAN[1] - 1), seed=st.integers(0, 2**32 - 1))
def test_no_accepted_expression_reads_after_t0(span: _Columns, text: str, t0: int, seed: int) -> None:
    """Rows after T0 replaced by noise change nothing at T0; the trailing-slice value equals the full one."""
    node = _parsed(text)
    rng = np.random.default_rng(seed)
    truncated = {name: values[: t0 + 1] for name, values in span.items()}
    noisy = {}
    for name, values in span.items():
        noise = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1e9, -1.0], size=values[t0 + 1 :].shape)
        noise = np.where(rng.random(noise.shape) < 0.5, rng.normal(100, 50, noise.shape), noise)
        noisy[name] = np.concatenate([values[: t0 + 1], noise])
    at_t0 = evaluate(node, truncated)[-1]
    np.testing.assert_array_equal(evaluate(node, noisy)[t0], at_t0)
    if "EMA" not in text:  # EMA keeps ema_tail(N) rows: its bound is tested below
        np.testing.assert_array_equal(value_at_t0(node, truncated), at_t0)


@pytest.mark.parametrize("n", [1, 2, 5, 12, 60, 250])
def test_ema_at_t0_is_within_its_tail_weight_of_the_full_history(sample_store: MarketStore, n: int) -> None:
    """EMA keeps ``ema_tail(n)`` rows: the dropped older rows move it by at most 1e-6 of its input's range."""
    for t0 in T0S:
        columns = columns_at(sample_store.asof(t0), _pool(sample_store, t0))
        for field in ("close", "volume"):
            node = parse_expression(f"EMA(${field}, {n})")
            full = evaluate(node, columns)[-1]
            spread = np.nanmax(columns[field], axis=0) - np.nanmin(columns[field], axis=0)
            assert np.all(np.abs(value_at_t0(node, columns) - full) <= 1e-6 * spread + 1e-9 * np.abs(full))
    assert lookback(parse_expression(f"EMA($close, {n})")) == ema_tail(n)
