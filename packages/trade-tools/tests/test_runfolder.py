"""The run folder's grouped appends."""

from __future__ import annotations

from pathlib import Path

from trade_eval.runfolder import Appender, ends_inside_line, read_lines, trajectory_id_of


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
