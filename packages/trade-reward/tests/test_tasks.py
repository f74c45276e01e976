"""``trade data tasks`` on the real data: task records, embargoed splits, portfolios, determinism, errors.

Most tests share one build of a short range (two splits around a gap) so the suite stays quick; the
point-in-time test rebuilds a day from a dataset whose future was rewritten.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import trade_reward.taskfolder as folder_module
from trade_core.errors import TradeError
from trade_core.testing import run_trade
from trade_data.qlib_dir import DatasetMeta, read_calendar_file, read_instruments_file, write_dataset
from trade_data.store import MarketStore
from trade_data.symbols import Board, board_of
from trade_data.synth import write_synthetic_market
from trade_data.testing import perturb_future
from trade_reward.taskbuilder import build_tasks
from trade_reward.taskfolder import TaskRecord, read_manifest, read_records
from trade_reward.taskstats import task_stats
from trade_tools.episode import Episode, Task
from trade_tools.sampler import day_task

SHORT = "train=2023-01-01:2023-03-31,val=2023-04-10:2023-05-31"
BOUNDS = {"train": (dt.date(2023, 1, 1), dt.date(2023, 3, 31)), "val": (dt.date(2023, 4, 10), dt.date(2023, 5, 31))}
SEED, PER_DAY = 7, 2


@pytest.fixture(scope="module")
def built(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tasks") / "out"
    build_tasks(sample_dataset, out, split=SHORT, seed=SEED, per_day=PER_DAY)
    return out


def tasks_of(out: Path, split: str) -> list[Task]:
    return [record.task for record in read_records(out, split)]


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_layout_records_and_manifest(built: Path, sample_dataset: Path) -> None:
    assert sorted(p.name for p in built.iterdir()) == ["manifest.json", "train.jsonl", "val.jsonl"]
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["synthetic"] is False and manifest["seed"] == SEED
    assert read_manifest(built).dataset_in(built) == sample_dataset.resolve()
    assert manifest["format_version"] == 2
    for split in BOUNDS:
        records = read_records(built, split)
        [counted] = [s["tasks"] for s in manifest["splits"] if s["name"] == split]
        assert len(records) == counted > 0
        for i, record in enumerate(records):
            task, truth = record.task, record.ground_truth
            assert record.index == i and record.split == split and task.task_id.startswith(f"{split}-{task.date}-")
            assert truth.date == task.date and set(truth.growth) == set(truth.close) == set(task.pool)
            assert set(task.holdings) <= set(task.pool) and all(len(g) == 3 for g in truth.growth.values())
    ids = [t.task_id for split in BOUNDS for t in tasks_of(built, split)]
    assert len(ids) == len(set(ids))


def test_prompts_are_the_episode_messages_with_no_future(built: Path, sample_store: MarketStore) -> None:
    for split in BOUNDS:
        for record in read_records(built, split)[::9]:
            task, truth = record.task, record.ground_truth
            assert record.prompt == Episode.start(task, sample_store).messages()
            system, user = (m["content"] for m in record.prompt)
            assert f"市场状态（截至{task.date}收盘" in system and f"交易日T0：{task.date}" in user
            assert all(symbol in user for symbol in task.pool)
            assert not any(str(day) in system + user for day in truth.horizon_dates)


def test_play_and_tiny_practise_the_days_training_draws(
    sample_dataset: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """One sampler: `day_task` (play, tiny) gives the task `trade data tasks` draws for the same day and seed."""
    build_tasks(sample_dataset, tmp_path / "out", split="train=2023-01-03:2023-01-31", pool_size="12", seed=5)
    drawn = tasks_of(tmp_path / "out", "train")
    assert len({len(t.holdings) for t in drawn}) > 2  # the drawn 0..5 holdings, not a fixed three
    for task in drawn:
        same = day_task(sample_store, task.date, pool_size=12, seed=5).model_copy(update={"task_id": task.task_id})
        assert same == task


def test_embargo_keeps_every_forward_window_inside_its_split(built: Path, sample_store: MarketStore) -> None:
    calendar = [d.date() for d in sample_store.calendar]
    for split, (start, end) in BOUNDS.items():
        days = [t.date for t in tasks_of(built, split)]
        assert all(start <= day and sample_store.shift(day, 3) <= end for day in days)
        expected = [d for i, d in enumerate(calendar[:-3]) if start <= d and calendar[i + 3] <= end]
        assert sorted(set(days)) == expected  # every eligible day, nothing in the gaps
        assert days.count(expected[0]) == PER_DAY
    assert max(t.date for t in tasks_of(built, "train")) == dt.date(2023, 3, 28)  # T+3 = 03-31


def test_portfolios_are_whole_lots_at_the_previous_close(
    built: Path, sample_store: MarketStore, sample_table: pd.DataFrame, sample_data: Path
) -> None:
    members = read_instruments_file(sample_data / "csi300.txt")
    tasks = tasks_of(built, "train") + tasks_of(built, "val")
    for task in tasks:
        view = sample_store.asof(task.date)
        assert 10 <= len(task.pool) <= 30 and task.cash >= 0
        assert set(task.cost_basis) == set(task.holdings) and len(task.holdings) <= 5
        invested = sum(n * task.cost_basis[s] for s, n in task.holdings.items())
        assert task.cash + invested == pytest.approx(1_000_000, abs=0.01)
        for symbol, shares in task.holdings.items():
            assert shares % 100 == 0 and shares >= (200 if board_of(symbol) is Board.STAR else 100)
        for symbol in task.pool:
            assert not view.is_suspended(symbol)
            day = pd.Timestamp(task.date)
            spans = members[members["symbol"] == symbol]
            assert ((spans["start"] <= day) & (spans["end"] >= day)).any(), (symbol, task.date)
    assert {len(t.holdings) for t in tasks} == set(range(6))
    held = [(t.date, s, c) for t in tasks[::15] for s, c in t.cost_basis.items()][:8]
    assert held
    for day, symbol, cost in held:  # by hand: the last traded close before T0, on T0's basis (ex-dates: ex-right)
        bars = sample_table[(sample_table["symbol"] == symbol) & (sample_table["date"] <= pd.Timestamp(day))]
        traded = bars[bars["volume"] > 0]
        before = traded[traded["date"] < pd.Timestamp(day)].iloc[-1]
        expected = math.floor(before["close"] * before["factor"] / traded["factor"].iloc[-1] * 100 + 0.5 + 1e-9) / 100
        assert cost == pytest.approx(expected, abs=1e-6)


def test_the_same_seed_gives_the_same_bytes(built: Path, sample_dataset: Path, tmp_path: Path) -> None:
    build_tasks(sample_dataset, tmp_path / "again", split=SHORT, seed=SEED, per_day=PER_DAY)
    assert contents(tmp_path / "again") == contents(built)
    build_tasks(sample_dataset, tmp_path / "other", split=SHORT, seed=SEED + 1, per_day=PER_DAY)
    assert (tmp_path / "other" / "train.jsonl").read_bytes() != (built / "train.jsonl").read_bytes()


@pytest.mark.slow
def test_prompts_ignore_the_future_the_ground_truth_does_not(
    built: Path, sample_table: pd.DataFrame, sample_data: Path, tmp_path: Path
) -> None:
    t0 = pd.Timestamp("2023-02-15")
    members = read_instruments_file(sample_data / "csi300.txt")
    table, new_members = perturb_future(sample_table, members, t0, seed=3)
    perturbed = write_dataset(
        table,
        tmp_path / "perturbed",
        meta=DatasetMeta(source="perturbed"),
        calendar=read_calendar_file(sample_data / "calendar.txt"),
        universes={"csi300": new_members},
    )
    build_tasks(perturbed, tmp_path / "out", split="train=2023-02-15:2023-02-28", seed=SEED, per_day=PER_DAY)
    day = f"{t0:%Y-%m-%d}"
    original = [r for r in read_records(built, "train") if r.task.task_id.startswith(f"train-{day}-")]
    changed = [r for r in read_records(tmp_path / "out", "train") if r.task.task_id.startswith(f"train-{day}-")]
    assert len(original) == len(changed) == PER_DAY
    for before, after in zip(original, changed, strict=True):
        assert after.prompt == before.prompt and after.task == before.task
        assert after.ground_truth != before.ground_truth


BAD_INPUTS = [
    (["--split", "train=2023-01-01"], "is not NAME=START:END"),
    (["--split", "train=20230101:20230331"], "train=20230101:20230331' is not NAME=START:END"),
    (["--split", "train=2023-03-31:2023-01-01"], "ends before it starts"),
    (["--split", "a=2023-01-01:2023-03-31,b=2023-03-01:2023-05-31"], "a (2023-01-01..2023-03-31) overlaps b"),
    (["--split", "train=2031-01-01:2031-12-31"], "has no trading day with its T+3 inside it"),
    (["--pool-size", "30-10"], "want 1 <= MIN <= MAX"),
    (["--pool-size", "ten"], "is not N or MIN-MAX"),
    (["--pool-size", "400"], "exceeds csi300's size"),
    (["--per-day", "0"], "--per-day 0: want at least 1"),
    (["--universe", "csi999"], "unknown universe 'csi999' (known: all, csi300)"),
    (["--data", "no-such-dataset"], "no-such-dataset is not a dataset"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_inputs_are_one_line_errors_that_leave_out_alone(
    args: list[str], message: str, built: Path, sample_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    shutil.copytree(built, out)
    before = contents(out)
    base = ["data", "tasks", "--data", str(sample_dataset), "--out", str(out), "--split", SHORT]
    run = run_trade(*base, *args, cwd=tmp_path)  # a repeated option: the last one wins
    errors = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert run.code == 2 and len(errors) == 1 and message in errors[0], run.err
    assert "Traceback" not in run.err
    assert contents(out) == before and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failed_write_leaves_out_alone(
    built: Path, sample_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    shutil.copytree(built, out)
    before = contents(out)
    write_split = folder_module.write_split

    def fail_on_val(folder: Path, name: str, records: list[TaskRecord]) -> None:
        if name == "val":
            raise OSError("disk full")
        write_split(folder, name, records)

    monkeypatch.setattr(folder_module, "write_split", fail_on_val)
    with pytest.raises(OSError, match="disk full"):
        build_tasks(sample_dataset, out, split=SHORT, seed=SEED + 1)
    assert contents(out) == before and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_folder_that_is_not_a_tasks_folder_is_not_replaced(sample_dataset: Path, tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(TradeError, match="is not a tasks folder"):
        build_tasks(sample_dataset, tmp_path, split=SHORT)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.real_data
def test_cli_builds_and_shows_stats(sample_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    run = run_trade(
        "data",
        "tasks",
        "--data",
        str(sample_dataset),
        "--out",
        str(out),
        "--split",
        SHORT,
        "--pool-size",
        "20",
        "--seed",
        "3",
    )
    assert run.code == 0, run.err
    assert "real market data" in run.out and "train       56 tasks on 56 days, T0 2023-01-03 .. 2023-03-28" in run.out
    run = run_trade("data", "tasks", "--stats", str(out))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith(f"tasks {out}  [real market data;") and "pool 20-20, 1 per day" in lines[0]
    [train] = [line for line in lines if line.startswith("train ")]
    assert "56  2023-01-03 .. 2023-03-28  20/20/20" in train
    assert sum(int(part.split(":")[1]) for part in train.split("%")[-1].split()) == 56  # holdings counts
    stats = task_stats(out)
    assert [s.tasks for s in stats.splits] == [56, 32] and all(0 < c <= 1 for c in stats.splits[0].cash_shares)


def test_stats_of_a_bad_folder_is_one_line(tmp_path: Path) -> None:
    run = run_trade("data", "tasks", "--stats", str(tmp_path))
    assert run.code == 2 and run.err.strip() == (
        f"error: {tmp_path} is not a tasks folder (no manifest.json) (build one with `trade data tasks`)"
    )
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(TradeError, match="is not a tasks manifest"):
        task_stats(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format_version": 1}')  # verl parquet beside, no prompts
    with pytest.raises(TradeError, match=r"format_version: Input should be 2") as refused:
        task_stats(tmp_path)
    assert refused.value.hint == "rebuild the folder with `trade data tasks`"


def test_a_synthetic_dataset_is_flagged(tmp_path: Path) -> None:
    data = write_synthetic_market(tmp_path / "synth", symbols=40, start="2023-01-01", end="2023-06-30")
    split = "train=2023-01-01:2023-04-30,val=2023-05-01:2023-06-30"
    summary = build_tasks(data, tmp_path / "out", split=split, pool_size="5-15")
    assert summary.manifest.synthetic and "SYNTHETIC" in summary.to_text()
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["synthetic"] is True
    assert "SYNTHETIC" in task_stats(tmp_path / "out").to_text()
    assert all("【合成数据】" in r.prompt[0]["content"] for r in read_records(tmp_path / "out", "val"))


@pytest.mark.real_data
def test_anonymize_flags_the_tasks_and_renders_their_prompts_with_aliases(
    sample_dataset: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """`trade data tasks --anonymize`: the same draws and ground truth, each task flagged and its prompt anonymized
    (the one training and `trade eval tasks` replay), so no stock code or calendar date reaches the model."""
    split = "train=2023-01-03:2023-01-31"
    run = run_trade(
        "data",
        "tasks",
        "--data",
        str(sample_dataset),
        "--out",
        str(tmp_path / "anon"),
        "--split",
        split,
        "--seed",
        str(SEED),
        "--anonymize",
    )
    assert run.code == 0, run.err
    build_tasks(sample_dataset, tmp_path / "plain", split=split, seed=SEED)
    records, plain = read_records(tmp_path / "anon", "train"), read_records(tmp_path / "plain", "train")
    assert len(records) == len(plain) > 10
    for record, reference in zip(records, plain, strict=True):
        assert record.task == reference.task.model_copy(update={"anonymized": True})
        assert record.ground_truth == reference.ground_truth
        assert record.prompt == Episode.start(record.task, sample_store).messages() != reference.prompt
        text = "\n".join(m["content"] for m in record.prompt)
        assert re.search(r"(?i)(SH|SZ|BJ)\d{6}|\d{4}-\d{2}-\d{2}|\b\d{2}-\d{2}\b", text) is None, text
        assert "交易日：T0（" in text and "T0：T0" not in text and "市场状态（截至T0收盘" in text
    assert read_manifest(tmp_path / "anon").anonymized and not read_manifest(tmp_path / "plain").anonymized


def test_anonymize_noise_lands_in_every_written_task_and_in_what_its_episodes_show(
    sample_dataset: Path, sample_store: MarketStore, tmp_path: Path
) -> None:
    """`trade data tasks --anonymize --anonymize-noise SD`: each task carries SD, so whoever opens it (training,
    `trade eval tasks`) reads perturbed bars; the draws and the ground truth are the noiseless build's."""
    days = [d.date().isoformat() for d in sample_store.calendar[150:170]]
    split = f"train={days[0]}:{days[-1]}"
    common = ["data", "tasks", "--data", str(sample_dataset), "--split", split, "--seed", str(SEED), "--anonymize"]
    assert run_trade(*common, "--out", str(tmp_path / "noisy"), "--anonymize-noise", "0.02").code == 0
    assert run_trade(*common, "--out", str(tmp_path / "clean")).code == 0
    noisy, clean = read_records(tmp_path / "noisy", "train"), read_records(tmp_path / "clean", "train")
    assert len(noisy) == len(clean) > 5
    shown = []
    for record, reference in zip(noisy, clean, strict=True):
        assert record.task == reference.task.model_copy(update={"anonymize_noise": 0.02})
        assert record.ground_truth == reference.ground_truth
        episodes = [Episode.start(r.task, sample_store) for r in (record, reference)]
        symbol = record.task.pool[0]
        texts = [e.call("get_price_data", {"symbol": e.hide(symbol)}) for e in episodes]
        shown.append(texts[0] != texts[1])
    assert all(shown)


def test_the_dataset_is_found_from_anywhere_and_moves_with_the_tasks(
    sample_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built with relative paths from one folder, read from another; then both folders moved together."""
    project = tmp_path / "project"
    shutil.copytree(sample_dataset, project / "data")
    monkeypatch.chdir(project)
    build_tasks(Path("data"), Path("tasks"), split="train=2024-01-02:2024-01-31", per_day=1, seed=SEED)
    monkeypatch.chdir(tmp_path)
    assert read_manifest(project / "tasks").dataset_in(project / "tasks") == (project / "data").resolve()
    project.rename(tmp_path / "moved")
    assert (
        read_manifest(tmp_path / "moved" / "tasks").dataset_in(tmp_path / "moved" / "tasks")
        == (tmp_path / "moved" / "data").resolve()
    )


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_market(
        tmp_path_factory.mktemp("synth") / "m", symbols=40, start="2023-01-01", end="2023-03-31"
    )


SYNTH_SPLIT = "train=2023-01-01:2023-02-28,val=2023-03-01:2023-03-31"


def test_tools_and_prompt_set_reach_every_task_and_the_manifest(synthetic: Path, tmp_path: Path) -> None:
    """`--tools` and `--prompt-set`: the same draws and ground truth, each task naming them and its prompt rendered
    by them (the one training and `trade eval tasks` replay); a plain build writes no such keys in its tasks."""
    look_args = ["--tools", "compute_alpha_factor, TakeAction", "--prompt-set", "compact"]
    run = run_trade(
        "data",
        "tasks",
        "--data",
        str(synthetic),
        "--out",
        str(tmp_path / "look"),
        "--split",
        SYNTH_SPLIT,
        "--pool-size",
        "5-15",
        *look_args,
    )
    assert run.code == 0, run.err
    build_tasks(synthetic, tmp_path / "plain", split=SYNTH_SPLIT, pool_size="5-15")
    manifest, plain_manifest = read_manifest(tmp_path / "look"), read_manifest(tmp_path / "plain")
    assert (manifest.tools, manifest.prompt_set) == (["compute_alpha_factor", "TakeAction"], "compact")
    assert (plain_manifest.tools, plain_manifest.prompt_set) == (None, None)
    store = MarketStore.load(synthetic)
    look = {"tools": ["compute_alpha_factor", "TakeAction"], "prompt_set": "compact"}
    for split in ("train", "val"):
        records, plain = read_records(tmp_path / "look", split), read_records(tmp_path / "plain", split)
        assert len(records) == len(plain) > 10
        for record, reference in zip(records, plain, strict=True):
            assert record.task == reference.task.model_copy(update=look)
            assert record.ground_truth == reference.ground_truth
            episode = Episode.start(record.task, store)
            assert record.prompt == episode.messages() != reference.prompt
            assert [s["function"]["name"] for s in episode.tool_schemas()] == look["tools"]
            assert "市场状态" not in record.prompt[0]["content"] and "市场状态" in reference.prompt[0]["content"]
        lines = (tmp_path / "plain" / f"{split}.jsonl").read_text().splitlines()
        assert not any({"tools", "prompt_set"} & set(json.loads(line)["task"]) for line in lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tools", "TakeAction,get_news"], "names unknown tools get_news (known: get_price_data,"),
        (["--prompt-set", "verbose"], "unknown prompt set 'verbose' (valid: compact, compact-en, default)"),
    ],
)
def test_unknown_tools_or_prompt_sets_are_one_line_errors(
    synthetic: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    run = run_trade(
        "data",
        "tasks",
        "--data",
        str(synthetic),
        "--out",
        str(tmp_path / "out"),
        "--split",
        SYNTH_SPLIT,
        "--pool-size",
        "5-15",
        *args,
    )
    errors = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert run.code == 2 and len(errors) == 1 and message in errors[0], run.err
    assert "Traceback" not in run.err and not (tmp_path / "out").exists()


def test_the_module_that_builds_a_tasks_folder_says_so() -> None:
    """Four modules were called "tasks"; the one that builds a folder is ``taskbuilder`` (no README names the old
    ``trade_reward.tasks``, so it is gone rather than deprecated)."""
    assert build_tasks.__module__ == "trade_reward.taskbuilder"
    assert importlib.util.find_spec("trade_reward.tasks") is None
