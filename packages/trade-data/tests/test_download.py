"""``trade data download``: archives and baostock CSVs converted offline, unsafe input refused, errors on one line.

Fixture archives are built here from a tiny dataset written by ``write_dataset``, nested one
level deep like the real downloads; only the network step is not exercised (a closed local
port stands in for an offline machine).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trade_core.errors import TradeError
from trade_data.info import dataset_info
from trade_data.qlib_dir import DatasetMeta, read_feature, read_meta, write_dataset
from trade_data.sources import BUILTIN_SOURCES, DATA_SOURCES, ArchiveSource, download

TRADE = str(Path(sys.executable).with_name("trade"))
SYMBOLS = ["SH600000", "SH600519", "SZ000001"]
DAYS = pd.bdate_range("2024-01-02", periods=10)


def _table() -> pd.DataFrame:
    rows = []
    for k, symbol in enumerate(SYMBOLS):
        for i, day in enumerate(DAYS):
            close = 10.0 * (k + 1) + i * 0.1
            rows.append((day, symbol, close, close + 0.2, close - 0.2, close, 1000.0 + i, 1.0 + k * 0.5))
    return pd.DataFrame(rows, columns=["date", "symbol", "open", "high", "low", "close", "volume", "factor"])


def _provider(tmp: Path, nest: str) -> Path:
    """A Qlib provider dir without trade.json at ``tmp/build/<nest>``, as a release would ship it."""
    root = write_dataset(_table(), tmp / "build" / nest, meta=DatasetMeta(source="fixture"))
    (root / "trade.json").unlink()
    return root


def _zip(tmp: Path, extra: dict[str, bytes] | None = None, with_provider: bool = True) -> Path:
    path = tmp / "qlib_data_cn_1d_latest.zip"
    with zipfile.ZipFile(path, "w") as archive:
        if with_provider:
            root = _provider(tmp, "qlib_data")
            for file in sorted(root.rglob("*")):
                archive.write(file, file.relative_to(root.parent).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(zipfile.ZipInfo(name), data)
    return path


def _tar(tmp: Path, bad: tarfile.TarInfo | None = None) -> Path:
    path = tmp / "qlib_bin.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(_provider(tmp, "qlib_bin"), arcname="qlib_bin")
        if bad is not None:
            archive.addfile(bad)
    return path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def existing(tmp_path: Path) -> Path:
    """A dataset already at the output path, which a failed convert must leave byte for byte."""
    table = _table().query("symbol == 'SH600000'")
    return write_dataset(table, tmp_path / "work" / "out", meta=DatasetMeta(source="before", synthetic=True))


def _assert_untouched(existing: Path, before: dict[str, bytes]) -> None:
    assert _snapshot(existing) == before
    assert sorted(p.name for p in existing.parent.iterdir()) == ["out"]  # no staging folder left behind


def _check_converted(out: Path, source: str) -> None:
    info = dataset_info(out)
    assert (info.symbols, info.first_date, info.last_date, info.trading_days) == (3, "2024-01-02", "2024-01-15", 10)
    assert not info.synthetic and info.source == f"download:{source}"
    meta = read_meta(out)
    assert meta.parameters["url"] == DATA_SOURCES.get(source).origin
    assert len(str(meta.parameters["sha256"])) == 64
    start, close = read_feature(out, "SZ000001", "close")
    assert start == 0 and close[0] == pytest.approx(30.0 * 2.0)  # adjusted: raw x factor


def test_every_builtin_source_is_registered_by_the_data_plugin_and_found_by_name(tmp_path: Path) -> None:
    provided = DATA_SOURCES.provided()
    assert {name: (p.item, p.origin.name, p.origin.dist) for name, p in provided.items()} == {
        source.name: (source, "data", "trade-data") for source in BUILTIN_SOURCES
    }
    with pytest.raises(TradeError) as error:
        download("nope", tmp_path / "out")
    assert error.value.hint == f"valid: {', '.join(sorted(provided))}"


def test_zip_converts_into_a_dataset(tmp_path: Path, existing: Path) -> None:
    out = DATA_SOURCES.get("qlib-cn").convert(_zip(tmp_path), existing)
    _check_converted(out, "qlib-cn")
    assert sorted(p.name for p in existing.parent.iterdir()) == ["out"]


def test_tar_converts_into_a_dataset(tmp_path: Path) -> None:
    out = DATA_SOURCES.get("qlib-community").convert(_tar(tmp_path), tmp_path / "new" / "out")
    _check_converted(out, "qlib-community")


@pytest.mark.qlib
def test_converted_dataset_reads_in_qlib(tmp_path: Path) -> None:
    pytest.importorskip("qlib")
    out = download("qlib-cn", tmp_path / "out", from_file=_zip(tmp_path))
    script = f"""
        import qlib
        from qlib.data import D
        qlib.init(provider_uri={str(out)!r}, region="cn")
        frame = D.features(["SH600000", "SZ000001"], ["$close"], start_time="2024-01-02", end_time="2024-01-15")
        print(frame["$close"].xs("SZ000001").round(3).tolist())
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    expected = [round((30.0 + i * 0.1) * 2.0, 3) for i in range(10)]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("name", ["../evil.txt", "qlib_data/../../evil.txt", "ABSOLUTE"])
def test_zip_slip_is_refused(tmp_path: Path, existing: Path, name: str) -> None:
    target = tmp_path / "evil.txt"
    name = str(target) if name == "ABSOLUTE" else name
    before = _snapshot(existing)
    with pytest.raises(TradeError, match="unsafe member"):
        DATA_SOURCES.get("qlib-cn").convert(_zip(tmp_path, {name: b"pwned"}), existing)
    assert not target.exists() and not (existing.parent / "evil.txt").exists()
    _assert_untouched(existing, before)


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    "bad",
    [
        _member("../evil.txt"),
        _member("/tmp/trade-download-test-evil.txt"),
        _member("qlib_bin/escape", tarfile.SYMTYPE, "../../../.."),
        _member("qlib_bin/passwd", tarfile.LNKTYPE, "../../etc/passwd"),
    ],
    ids=["dotdot", "absolute", "symlink-escape", "hardlink-escape"],
)
def test_tar_escape_is_refused(tmp_path: Path, existing: Path, bad: tarfile.TarInfo) -> None:
    before = _snapshot(existing)
    with pytest.raises(TradeError, match="unsafe member"):
        DATA_SOURCES.get("qlib-community").convert(_tar(tmp_path, bad), existing)
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/trade-download-test-evil.txt").exists()
    _assert_untouched(existing, before)


def test_archive_without_provider_dir_leaves_out_untouched(tmp_path: Path, existing: Path) -> None:
    before = _snapshot(existing)
    artifact = _zip(tmp_path, {"data/readme.txt": b"not qlib"}, with_provider=False)
    with pytest.raises(TradeError, match="no Qlib provider dir"):
        DATA_SOURCES.get("qlib-cn").convert(artifact, existing)
    _assert_untouched(existing, before)


def test_wrong_archive_type_is_one_error(tmp_path: Path, existing: Path) -> None:
    before = _snapshot(existing)
    with pytest.raises(TradeError, match="not a readable archive"):
        DATA_SOURCES.get("qlib-cn").convert(_tar(tmp_path), existing)
    _assert_untouched(existing, before)


BAOSTOCK_CSV = """\
date,code,open,high,low,close,preclose,volume,amount,adjustflag,turn,tradestatus,pctChg,isST,hs300,foreAdjustFactor,backAdjustFactor,adjustFactor
2019-06-03,sh.600000,,,,,,,,,,,,,,0.5,2.0,2.0
2024-01-02,sh.000300,3400.0,3420.0,3390.0,3410.0,3400.0,100000,1e9,3,,1,0.29,0,0,,,
2024-01-03,sh.000300,3410.0,3430.0,3400.0,3420.0,3410.0,100000,1e9,3,,1,0.29,0,0,,,
2024-01-04,sh.000300,3420.0,3440.0,3410.0,3430.0,3420.0,100000,1e9,3,,1,0.29,0,0,,,
2024-01-05,sh.000300,3430.0,3450.0,3420.0,3440.0,3430.0,100000,1e9,3,,1,0.29,0,0,,,
2024-01-02,sh.600000,7.0,7.2,6.9,7.1,7.0,5000,35000,3,0.1,1,1.4,0,1,,,
2024-01-03,sh.600000,7.1,7.3,7.0,7.2,7.1,5000,35000,3,0.1,1,1.4,0,1,,,
2024-01-04,sh.600000,6.8,6.9,6.7,6.8,7.2,5000,35000,3,0.1,1,-5.5,0,1,0.6,2.5,2.5
2024-01-05,sh.600000,6.8,6.9,6.7,6.9,6.8,5000,35000,3,0.1,1,1.4,0,1,,,
2024-01-02,sz.000001,9.0,9.2,8.9,9.1,9.0,8000,72000,3,0.2,1,1.1,0,1,,,
2024-01-03,sz.000001,9.1,9.3,9.0,9.2,9.1,8000,72000,3,0.2,1,1.1,0,1,,,
2024-01-04,sz.000001,9.2,9.2,9.2,9.2,9.2,0,0,3,0.0,0,0.0,0,0,,,
2024-01-05,sz.000001,9.2,9.4,9.1,9.3,9.2,8000,72000,3,0.2,1,1.1,0,0,,,
"""


def test_baostock_csv_converts_without_the_package(tmp_path: Path) -> None:
    artifact = tmp_path / "baostock_csi300_2024-01-02_2024-01-05.csv"
    artifact.write_text(BAOSTOCK_CSV)
    out = download("baostock", tmp_path / "out", from_file=artifact)
    info = dataset_info(out)
    assert (info.symbols, info.indices, info.trading_days, info.suspended_days) == (3, ["SH000300"], 4, 1)
    assert info.source == "download:baostock" and not info.synthetic
    (csi300,) = info.universes
    assert (csi300.name, csi300.symbols, csi300.members_first_day, csi300.members_last_day) == ("csi300", 2, 2, 1)
    factor = read_feature(out, "SH600000", "factor")[1]
    np.testing.assert_allclose(factor, [2.0, 2.0, 2.5, 2.5])  # event before the range, then the ex-date
    assert read_feature(out, "SZ000001", "factor")[1].tolist() == [1.0] * 4  # never adjusted
    assert read_feature(out, "SH600000", "close")[1][0] == pytest.approx(7.1 * 2.0)
    assert "sha256" in read_meta(out).parameters


@pytest.mark.skipif(importlib.util.find_spec("baostock") is not None, reason="baostock is installed")
def test_baostock_fetch_without_package_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(TradeError) as caught:
        download("baostock", tmp_path / "out", options={"start": "2024-01-02"})
    assert "pip install 'trade-data[baostock]'" in caught.value.one_line()


def test_options_are_checked_per_source(tmp_path: Path) -> None:
    with pytest.raises(TradeError, match="does not take --start"):
        download("qlib-cn", tmp_path / "out", options={"start": "2024-01-02"})
    with pytest.raises(TradeError, match="with --from-file the file decides"):
        download("baostock", tmp_path / "out", from_file=tmp_path / "x.csv", options={"start": "2024-01-02"})
    with pytest.raises(TradeError, match="no such file"):
        download("qlib-cn", tmp_path / "out", from_file=tmp_path / "missing.zip")


def _trade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRADE, *args], capture_output=True, text=True)


def test_cli_converts_from_file(tmp_path: Path) -> None:
    out = tmp_path / "cn"
    result = _trade("data", "download", "--source", "qlib-cn", "--from-file", str(_zip(tmp_path)), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "source: download:qlib-cn" in result.stdout and "3 stocks" in result.stdout
    _check_converted(out, "qlib-cn")


def test_cli_unknown_source_is_one_line(tmp_path: Path) -> None:
    result = _trade("data", "download", "--source", "nope", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: unknown data source 'nope' (valid: baostock, qlib-cn, qlib-community)"
    ]


def test_cli_help_explains_offline_use_and_lists_sources() -> None:
    result = _trade("data", "download", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "OFFLINE" in text and "--from-file" in text
    for source in DATA_SOURCES.all().values():
        assert source.name in text and source.origin in text


def test_plugins_json_lists_the_sources() -> None:
    result = _trade("plugins", "--json")
    assert result.returncode == 0, result.stderr
    (data,) = [p for p in json.loads(result.stdout)["plugins"] if p["name"] == "data"]
    assert data["hooks"]["trade_register_data_sources"] == ["baostock", "qlib-cn", "qlib-community"]


def test_network_failure_is_one_line(tmp_path: Path) -> None:
    """A source pointed at a closed local port fails the way an offline machine does."""
    script = """
        import sys
        from trade_core.cli import main
        from trade_core.hookspecs import hookimpl
        from trade_core.plugins import get_manager
        from trade_data.sources import ArchiveSource

        @hookimpl
        def trade_register_data_sources(register):
            register(ArchiveSource("closed-port", "test", "http://127.0.0.1:9/data.zip", archive="zip"))

        get_manager().register(sys.modules[__name__], "closed-port-plugin")
        main(sys.argv[1:])
    """
    out = tmp_path / "work" / "out"
    argv = ["data", "download", "--source", "closed-port", "--out", str(out)]
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *argv], capture_output=True, text=True)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: cannot download http://127.0.0.1:9/data.zip (")
    assert "may be offline" in line and "--from-file" in line
    assert not out.exists() and list(out.parent.iterdir()) == []  # the temporary download folder is gone


def test_network_failure_in_process(tmp_path: Path) -> None:
    source = ArchiveSource("closed-port", "test", "http://127.0.0.1:9/data.zip", archive="zip")
    with pytest.raises(TradeError, match="may be offline"):
        source.fetch(tmp_path, {})
    assert list(tmp_path.iterdir()) == []  # no partial file
