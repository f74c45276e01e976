"""`trade data import`: real data in, pyqlib reads the same values back; bad input changes nothing."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import structlog
import structlog.testing

from trade_core.testing import run_trade
from trade_data import qlib_dir
from trade_data.errors import DatasetError, DataValidationError
from trade_data.importer import import_table
from trade_data.info import dataset_info
from trade_data.qlib_dir import read_meta, read_table_back, read_universe

GOOD_CSV = """date,symbol,open,high,low,close,volume,factor
2024-01-02,SH600000,10.00,10.50,9.90,10.20,100000,1.5
2024-01-03,SH600000,10.20,10.40,10.00,10.10,120000,1.5
2024-01-02,SZ000001,9.00,9.20,8.80,9.10,300000,2.0
2024-01-03,SZ000001,9.10,9.30,9.00,9.20,310000,2.0
"""


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.real_data
def test_real_import_info(sample_dataset: Path) -> None:
    info = dataset_info(sample_dataset)
    assert (info.symbols, info.first_date, info.last_date, info.trading_days) == (540, "2018-01-02", "2025-12-31", 1942)
    assert info.indices == ["SH000001", "SH000300", "SH000905"]
    assert not info.synthetic and read_meta(sample_dataset).source == "import:daily.parquet"
    [csi300] = info.universes
    assert csi300.name == "csi300" and 285 <= csi300.members_first_day <= 300 and csi300.members_last_day == 300
    text = info.to_text()
    assert "540 (537 stocks" in text and "2018-01-02 .. 2025-12-31" in text and "universe    csi300" in text


@pytest.mark.real_data
def test_cli_import_prints_info(sample_data: Path, tmp_path: Path) -> None:
    run = run_trade(
        "data",
        "import",
        str(sample_data / "daily.parquet"),
        "--out",
        str(tmp_path / "Q"),
        "--calendar",
        str(sample_data / "calendar.txt"),
        "--universe",
        f"csi300={sample_data / 'csi300.txt'}",
    )
    assert run.code == 0, run.err
    assert "540 (537 stocks" in run.out and "universe    csi300" in run.out
    info = run_trade("data", "info", str(tmp_path / "Q"))
    assert info.code == 0 and "real market data" in info.out


@pytest.mark.qlib
def test_pyqlib_reads_back_the_source_rows(sample_dataset: Path, sample_table: pd.DataFrame) -> None:
    qlib = pytest.importorskip("qlib")
    from qlib.data import D

    qlib.init(provider_uri=str(sample_dataset), region="cn", kernels=1)
    rng = np.random.default_rng(7)
    stocks = sorted(set(sample_table["symbol"]) - {"SH000001", "SH000300", "SH000905"})
    symbols = [*rng.choice(stocks, size=25, replace=False), "SH000300", "SZ000001", "SH600519"]
    fields = ["$open", "$high", "$low", "$close", "$volume", "$factor"]
    got = D.features(symbols, fields, start_time="2018-01-01", end_time="2025-12-31").reset_index()
    got = got.rename(columns={"instrument": "symbol", "datetime": "date"})
    source = sample_table[sample_table["symbol"].isin(symbols)]
    merged = source.merge(got, on=["symbol", "date"], how="left")
    assert len(merged) == len(source) and merged["$close"].notna().all()
    for price in ("open", "high", "low", "close"):
        np.testing.assert_allclose(merged[f"${price}"], merged[price] * merged["factor"], rtol=2e-7)
        raw = np.round(merged[f"${price}"].astype("float64") / merged["$factor"].astype("float64"), 2)
        stocks_only = ~merged["symbol"].isin(["SH000300"])
        np.testing.assert_array_equal(raw[stocks_only], merged[price][stocks_only])  # raw prices recoverable
    np.testing.assert_allclose(merged["$volume"], merged["volume"] / merged["factor"], rtol=2e-7)
    # rows absent from the source (suspensions) read as NaN
    days_listed = got.groupby("symbol")["$close"].size().sum()
    assert got["$close"].isna().sum() == days_listed - len(source)
    day = source[(source["symbol"] == "SZ000001") & (source["date"] == "2020-01-02")]  # 16.87 in the real sample
    close = D.features(["SZ000001"], ["$close/$factor"], "2020-01-02", "2020-01-02").iloc[0, 0]
    assert close == pytest.approx(day["close"].item())


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bars.csv"
    path.write_text(text)
    return path


BAD_TABLES = {
    "duplicate (symbol, date)": GOOD_CSV + "2024-01-03,SZ000001,9.10,9.30,9.00,9.20,310000,2.0\n",
    "NaN or non-positive prices": GOOD_CSV.replace("9.10,9.30,9.00,9.20", "9.10,9.30,9.00,-9.20"),
    "high < low": GOOD_CSV.replace("10.20,10.40,10.00,10.10", "10.20,9.90,10.00,10.10"),
    "close or open outside [low, high]": GOOD_CSV.replace("10.00,10.50,9.90,10.20", "10.00,10.50,9.90,10.60"),
    "a date not on the calendar": GOOD_CSV.replace("2024-01-03,SZ000001", "2024-01-06,SZ000001"),
    "missing columns factor": GOOD_CSV.replace(",factor", ",fct"),
    "a malformed symbol": GOOD_CSV.replace("SZ000001", "000001.SZ"),
    "infinite or out of float32's range": GOOD_CSV.replace("9.10,9.30,9.00,9.20", "inf,inf,inf,inf"),
    "infinite or out of float32's range #1e39": GOOD_CSV.replace("9.10,9.30,9.00,9.20", "1e39,1e39,1e39,1e39"),
    "infinite or out of float32's range #x factor": GOOD_CSV.replace("9.20,310000,2.0", "9.20,310000,4e37"),
    "infinite or out of float32's range #volume": GOOD_CSV.replace("310000", "inf"),
    "text where a number belongs (volume)": GOOD_CSV.replace("310000", "lots"),
    "a missing date": GOOD_CSV.replace("2024-01-03,SZ000001", ",SZ000001"),
}


@pytest.mark.parametrize("problem", sorted(BAD_TABLES))
def test_bad_tables_are_refused_with_rows_and_nothing_is_written(tmp_path: Path, problem: str) -> None:
    calendar = tmp_path / "calendar.txt"
    calendar.write_text("2024-01-02\n2024-01-03\n2024-01-04\n")
    out = tmp_path / "ds"
    with pytest.raises(DataValidationError, match=re.escape(problem.split(" #")[0])):
        import_table(_write(tmp_path, BAD_TABLES[problem]), out, calendar_file=calendar)
    assert not out.exists() and not list(tmp_path.glob(".ds.*"))


def test_error_names_first_rows_and_count(tmp_path: Path) -> None:
    text = GOOD_CSV.replace("10.20,10.40,10.00,10.10", "10.20,9.90,10.00,10.10").replace(
        "9.10,9.30,9.00,9.20", "9.10,8.30,9.00,9.20"
    )
    with pytest.raises(DataValidationError) as error:
        import_table(_write(tmp_path, text), tmp_path / "ds")
    message = str(error.value)
    assert "2 rows with high < low" in message
    assert "row 2 (SH600000 2024-01-03" in message and "row 4 (SZ000001 2024-01-03" in message


def test_cli_bad_file_is_one_line_and_existing_dataset_untouched(tmp_path: Path) -> None:
    good = _write(tmp_path, GOOD_CSV)
    out = tmp_path / "ds"
    assert run_trade("data", "import", str(good), "--out", str(out)).code == 0
    before = _tree_digest(out)
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_TABLES["high < low"])
    empty = tmp_path / "empty.csv"  # its header only
    empty.write_text(GOOD_CSV.splitlines(keepends=True)[0])
    run = run_trade("data", "import", str(bad), "--out", str(out))
    assert run.code == 2 and "Traceback" not in run.err
    [line] = run.err.strip().splitlines()
    assert line.startswith("error: ") and "1 rows with high < low" in line
    assert _tree_digest(out) == before
    for args, expected in [
        (["data", "import", str(tmp_path / "nope.parquet"), "--out", str(out)], "no such file"),
        (["data", "import", str(empty), "--out", str(out)], "empty.csv: the table has no rows (a row per bar: date,"),
        (["data", "import", str(good), "--out", str(out), "--universe", "csi300"], "is not NAME=FILE"),
        (["data", "import", str(good), "--out", str(out), "--calendar", str(bad)], "not one YYYY-MM-DD date per line"),
        (["data", "info", str(tmp_path)], "is not a dataset"),
    ]:
        run = run_trade(*args)
        assert run.code == 2 and expected in run.err and len(run.err.strip().splitlines()) == 1, run.err
    assert _tree_digest(out) == before


def test_failure_while_writing_leaves_the_old_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = import_table(_write(tmp_path, GOOD_CSV), tmp_path / "ds")
    before = _tree_digest(out)

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(qlib_dir, "_write_features", disk_full)  # fault injection at the disk boundary
    with pytest.raises(OSError):
        import_table(_write(tmp_path, GOOD_CSV.replace("10.10,120000", "10.15,120000")), out, allow_revisions=True)
    assert _tree_digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["bars.csv", "ds"]


def test_out_folder_with_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(DatasetError, match="not a trade-agent dataset"):
        import_table(_write(tmp_path, GOOD_CSV), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def _feature_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted((folder / "features").rglob("*.bin"))}


@pytest.mark.real_data
@pytest.mark.slow  # three imports of the real table
def test_newer_table_appends_to_existing_dataset(sample_data: Path, sample_table: pd.DataFrame, tmp_path: Path) -> None:
    calendar = pd.read_csv(sample_data / "calendar.txt", header=None)[0]
    cut = "2025-06-30"
    old_rows = sample_table[sample_table["date"] <= cut]
    (tmp_path / "old_cal.txt").write_text("\n".join(calendar[calendar <= cut]) + "\n")
    old_rows.to_parquet(tmp_path / "old.parquet")
    out = import_table(
        tmp_path / "old.parquet",
        tmp_path / "Q",
        calendar_file=tmp_path / "old_cal.txt",
        universe_files={"csi300": sample_data / "csi300.txt"},
    )
    assert dataset_info(out).last_date == cut
    before = _feature_bytes(out)
    newer = sample_table[sample_table["date"] > "2025-03-31"]  # overlaps the old range by a quarter, identically
    newer.to_parquet(tmp_path / "new.parquet")
    import_table(tmp_path / "new.parquet", out, calendar_file=sample_data / "calendar.txt")
    info = dataset_info(out)
    assert (info.symbols, info.first_date, info.last_date, info.trading_days) == (540, "2018-01-02", "2025-12-31", 1942)
    assert [u.name for u in info.universes] == ["csi300"]  # kept from the first import
    after = _feature_bytes(out)
    changed = [name for name, old in before.items() if not after[name].startswith(old)]
    assert changed == []  # every old row, its change field included, comes back byte for byte
    direct = import_table(
        sample_data / "daily.parquet", tmp_path / "direct", calendar_file=sample_data / "calendar.txt"
    )
    assert after == _feature_bytes(direct)
    back = read_table_back(out, ["SH600519"])
    source = sample_table[sample_table["symbol"] == "SH600519"].reset_index(drop=True)
    np.testing.assert_array_equal(np.round(back["close"], 2), source["close"])


def test_dates_after_today_are_refused(tmp_path: Path) -> None:
    future = GOOD_CSV + "2099-01-05,SH600000,10.10,10.30,10.00,10.20,90000,1.5\n"
    with pytest.raises(DataValidationError, match=r"1 rows with a date after today \(\d{4}-\d\d-\d\d in China\)"):
        import_table(_write(tmp_path, future), tmp_path / "ds")
    calendar = tmp_path / "calendar.txt"
    calendar.write_text("2024-01-02\n2024-01-03\n2099-01-05\n")
    with pytest.raises(DataValidationError, match=r"calendar.txt: 1 days after today .*first: 2099-01-05"):
        import_table(_write(tmp_path, GOOD_CSV), tmp_path / "ds", calendar_file=calendar)
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("name", ["all", "../../escape", "a/b", "CSI300", ".hidden", "x" * 65])
def test_universe_names_are_validated(tmp_path: Path, name: str) -> None:
    members = tmp_path / "one_line.txt"
    members.write_text("SH600000\t2024-01-02\t2024-01-03\n")
    out = tmp_path / "deep" / "er" / "ds"
    with pytest.raises(DataValidationError, match="is not a universe name"):
        import_table(_write(tmp_path, GOOD_CSV), out, universe_files={name: members})
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bars.csv", "one_line.txt"]


def test_cli_universe_all_cannot_replace_the_symbol_list(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    assert run_trade("data", "import", str(_write(tmp_path, GOOD_CSV)), "--out", str(out)).code == 0
    before = _tree_digest(out)
    (tmp_path / "one_line.txt").write_text("SH600000\t2024-01-02\t2024-01-03\n")
    run = run_trade("data", "import", "bars.csv", "--out", "ds", "--universe", "all=one_line.txt", cwd=tmp_path)
    assert run.code == 2 and "'all' is not a universe name" in run.err and len(run.err.strip().splitlines()) == 1
    assert _tree_digest(out) == before


def test_revised_history_is_refused_unless_allowed(tmp_path: Path) -> None:
    out = import_table(_write(tmp_path, GOOD_CSV), tmp_path / "ds")
    before = _tree_digest(out)
    revised = GOOD_CSV.replace("10.20,10.40,10.00,10.10,120000", "10.20,10.40,10.00,10.15,120000")  # inside [l, h]
    newer = revised + "2024-01-04,SH600000,10.20,10.30,10.10,10.25,90000,1.5\n"
    with pytest.raises(
        DataValidationError, match=r"1 rows of .*differ.*first: SH600000 2024-01-03 close 10.1 -> 10.15"
    ):
        import_table(_write(tmp_path, newer), out)
    assert _tree_digest(out) == before
    import_table(_write(tmp_path, newer), out, allow_revisions=True)
    assert list(np.round(read_table_back(out, ["SH600000"])["close"], 2)) == [10.20, 10.15, 10.25]


def test_universe_file_that_loses_members_is_refused_unless_allowed(tmp_path: Path) -> None:
    members = tmp_path / "members.txt"
    members.write_text("SH600000\t2024-01-02\t2024-01-03\nSZ000001\t2024-01-02\t2024-01-03\n")
    out = import_table(_write(tmp_path, GOOD_CSV), tmp_path / "ds", universe_files={"csi300": members})
    before = _tree_digest(out)
    shorter = tmp_path / "one_line.txt"
    shorter.write_text("SH600000\t2024-01-03\t2024-01-03\n")
    expected = r"would drop 3 member-days of 2 symbols from universe csi300 \(first: SH600000 2024-01-02, SZ000001"
    with pytest.raises(DataValidationError, match=expected) as error:
        import_table(_write(tmp_path, GOOD_CSV), out, universe_files={"csi300": shorter})
    assert "--allow-drop" in str(error.value) and _tree_digest(out) == before
    import_table(_write(tmp_path, GOOD_CSV), out, universe_files={"csi300": shorter}, allow_drop=True)
    assert list(read_universe(out, "csi300")["symbol"]) == ["SH600000"]


def test_symbols_that_cannot_be_read_back_are_not_dropped_silently(tmp_path: Path) -> None:
    out = import_table(_write(tmp_path, GOOD_CSV), tmp_path / "ds")
    shutil.rmtree(out / "features" / "sz000001")  # listed in all.txt without bars, as some Qlib dirs ship
    newer = "date,symbol,open,high,low,close,volume,factor\n2024-01-04,SH600000,10.2,10.3,10.1,10.25,90000,1.5\n"
    with pytest.raises(DataValidationError, match=r"would drop 1 symbols without readable bars \(SZ000001\)"):
        import_table(_write(tmp_path, newer), out)
    import_table(_write(tmp_path, newer), out, allow_drop=True)
    assert dataset_info(out).symbols == 1


def test_cli_flags_accept_revisions_and_drops(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    (tmp_path / "members.txt").write_text("SH600000\t2024-01-02\t2024-01-03\n")
    (tmp_path / "later.txt").write_text("SH600000\t2024-01-03\t2024-01-03\n")
    good = _write(tmp_path, GOOD_CSV)
    assert (
        run_trade("data", "import", str(good), "--out", str(out), "--universe", "csi300=members.txt", cwd=tmp_path).code
        == 0
    )
    revised = tmp_path / "revised.csv"
    revised.write_text(GOOD_CSV.replace("9.10,9.30,9.00,9.20,310000", "9.10,9.30,9.00,9.25,310000"))
    args = ("data", "import", str(revised), "--out", str(out), "--universe", "csi300=later.txt")
    refused = run_trade(*args, cwd=tmp_path)
    assert refused.code == 2 and "--allow-revisions" in refused.err and len(refused.err.strip().splitlines()) == 1
    dropping = run_trade(*args, "--allow-revisions", cwd=tmp_path)  # the universe still loses a member-day
    assert dropping.code == 2 and "--allow-drop" in dropping.err
    assert run_trade(*args, "--allow-revisions", "--allow-drop", cwd=tmp_path).code == 0
    assert read_table_back(out, ["SZ000001"])["close"].round(2).tolist() == [9.10, 9.25]


def test_universe_ending_before_the_data_is_warned_about(tmp_path: Path) -> None:
    members = tmp_path / "members.txt"
    members.write_text("SH600000\t2024-01-02\t2024-01-03\nSZ000001\t2024-01-02\t2024-01-03\n")
    out = import_table(_write(tmp_path, GOOD_CSV), tmp_path / "ds", universe_files={"csi300": members})
    assert dataset_info(out).warnings == []
    newer = "date,symbol,open,high,low,close,volume,factor\n2024-01-04,SH600000,10.2,10.3,10.1,10.25,90000,1.5\n"
    with structlog.testing.capture_logs() as logs:
        import_table(_write(tmp_path, newer), out)
    [warning] = [entry for entry in logs if entry["log_level"] == "warning"]
    assert warning["event"] == "import.universe_ends_early" and warning["universe"] == "csi300"
    assert (warning["ends"], warning["data_ends"]) == ("2024-01-03", "2024-01-04")
    info = dataset_info(out)
    assert info.warnings == [
        "universe csi300 ends 2024-01-03, before the data (2024-01-04): later days have no members"
    ]
    assert "\nwarning     universe csi300 ends 2024-01-03" in info.to_text()
