"""The run folder: its grouped appends, the kinds it tells apart, and folders written in today's format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trade_core.errors import TradeError
from trade_core.files import Appender, ends_inside_line, read_jsonl, read_lines
from trade_records.runfolder import (
    MANIFEST,
    METRICS,
    ROLLOUTS,
    STEPS,
    SUMMARY,
    TRAJECTORIES,
    BacktestSummary,
    Manifest,
    RunManifest,
    TasksManifest,
    TasksSummary,
    kind_of,
    open_run,
    read_manifest,
    read_summary,
    trajectory_id_of,
)


def test_appended_lines_are_whole_in_the_files_before_any_fsync(tmp_path: Path) -> None:
    """A process killed between two fsyncs leaves every line it appended: each is written and flushed."""
    trajectories, episodes = tmp_path / "trajectories.jsonl", tmp_path / "episodes.jsonl"
    with Appender(every=3600) as appender:
        for n in range(3):
            appender.append(trajectories, f'{{"id": "t{n}"}}')
            appender.append(episodes, f'{{"trajectory_id": "t{n}"}}')
        assert [trajectory_id_of(line) for line in read_lines(trajectories)] == ["t0", "t1", "t2"]
        assert len(read_lines(episodes)) == 3 and not ends_inside_line(episodes)
    assert all(handle.closed for handle in appender.handles.values())


FOLDERS = Path(__file__).parent / "runfolders"
"""A backtest and a tasks run as `trade eval` wrote them before the run-folder model moved here (paths made
relative-looking: no machine's path in the repo)."""


@pytest.mark.parametrize(("kind", "model", "count"), [("backtest", Manifest, 2), ("tasks", TasksManifest, 2)])
def test_run_folders_in_todays_format_still_read_and_resume(
    kind: str, model: type[RunManifest], count: int, tmp_path: Path
) -> None:
    """Each folder's manifest reads as its kind's, its records as that kind's records, and a resume with the
    manifest it was started with keeps every record and trajectory (nothing is cut from a whole folder)."""
    folder = shutil.copytree(FOLDERS / kind, tmp_path / kind)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert kind_of(folder) == kind
    manifest = read_manifest(folder, model)
    assert type(manifest) is model and manifest.kind == kind and manifest.RECORDS in before
    records = open_run(folder, manifest, resume=True)
    assert len(records) == count and all(type(r) is model.RECORD for r in records)
    assert all(r.turns >= 1 and r.requests == 0 and r.trajectory_id for r in records)  # the Usage fields, flat
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    with pytest.raises(TradeError, match=f"is not a {'tasks' if kind == 'backtest' else 'backtest'} manifest"):
        read_manifest(folder, TasksManifest if kind == "backtest" else Manifest)


def test_a_folder_is_the_kind_its_files_and_manifest_say(tmp_path: Path) -> None:
    """A tasks run just started (its manifest alone, or its first trajectory before its first record) is a tasks
    run: the dashboard's kind was read from the manifest's text and listed the first as nothing and the second
    as a backtest. A data tasks folder's manifest names no kind; an unreadable manifest is shown as a backtest's."""

    def folder(name: str, files: dict[str, str]) -> Path:
        path = tmp_path / name
        for file, text in files.items():
            (path / file).parent.mkdir(parents=True, exist_ok=True)
            (path / file).write_text(text)
        return path

    tasks_manifest = (FOLDERS / "tasks" / MANIFEST).read_text()
    compact = json.dumps(json.loads(tasks_manifest), separators=(",", ":"))
    assert kind_of(folder("started", {MANIFEST: tasks_manifest})) == "tasks"
    assert kind_of(folder("compact", {MANIFEST: compact})) == "tasks"
    assert kind_of(folder("first", {MANIFEST: tasks_manifest, TRAJECTORIES: '{"id": "t0"}\n'})) == "tasks"
    assert kind_of(folder("days", {MANIFEST: (FOLDERS / "backtest" / MANIFEST).read_text()})) == "backtest"
    assert kind_of(folder("broken", {MANIFEST: "{not json"})) == "backtest"
    assert kind_of(folder("data-tasks", {MANIFEST: '{"format_version": 2, "splits": []}'})) is None
    assert kind_of(folder("verl", {f"{STEPS}/1.jsonl": ""})) == "training"
    assert kind_of(folder("trl", {METRICS: "", f"{ROLLOUTS}/{STEPS}/1.jsonl": ""})) == "training"
    assert kind_of(tmp_path / "empty") is None


def test_summaries_read_typed_by_kind_and_a_wrong_one_is_one_line(tmp_path: Path) -> None:
    """Today's summary.json of each kind reads as its model, the same JSON written back; one that is no JSON or
    not that kind's says so in one line."""
    backtest, tasks = read_summary(FOLDERS / "backtest", "backtest"), read_summary(FOLDERS / "tasks", "tasks")
    assert isinstance(backtest, BacktestSummary) and next(iter(backtest.rows)) == "random"
    assert backtest.nav["dates"][0] == "2024-01-31" and len(backtest.nav["random"]) == 3
    assert isinstance(tasks, TasksSummary) and tasks.episodes == 2 and tasks.played + tasks.failed == 2
    for kind, summary in (("backtest", backtest), ("tasks", tasks)):
        assert json.loads(summary.model_dump_json()) == json.loads((FOLDERS / kind / SUMMARY).read_text())
    (tmp_path / SUMMARY).write_bytes(b"\xff{")
    with pytest.raises(ValueError, match=r"^summary.json: unreadable \("):
        read_summary(tmp_path, "backtest")
    shutil.copy(FOLDERS / "tasks" / SUMMARY, tmp_path / SUMMARY)
    with pytest.raises(ValueError, match=r"^summary.json: not a backtest summary \(conventions: Field required"):
        read_summary(tmp_path, "backtest")


def test_a_jsonl_reader_leaves_out_a_line_still_being_written(tmp_path: Path) -> None:
    """metrics.jsonl read while the trainer appends: whole lines only, never a crash on the cut one."""
    path = tmp_path / METRICS
    assert read_jsonl(path) == []
    path.write_text('{"step": 1, "x": 0.5}\n[1, 2]\nnot json\n{"step": 2, "x": 0.25}\n{"step": 3, "x"')
    assert read_jsonl(path) == [{"step": 1, "x": 0.5}, {"step": 2, "x": 0.25}]
    path.write_text(path.read_text() + ": 1.0}\n")
    assert [line["step"] for line in read_jsonl(path)] == [1, 2, 3]
