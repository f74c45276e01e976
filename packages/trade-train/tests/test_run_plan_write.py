"""Writing a run folder: whole files or none, and two writers of one folder never share a temporary name."""

from __future__ import annotations

from pathlib import Path

from trade_train.trainer import RunPlan


def test_a_second_writer_leaves_the_first_writers_staging_files_alone(tmp_path: Path) -> None:
    plan = RunPlan(run_dir=tmp_path, command=["echo", "hi"], env={"A": "1"}, files={"spec.json": "{}\n"})
    staged = {name: tmp_path / f".{name}.tmp" for name in ("spec.json", "command.sh", "env.json")}
    for name, path in staged.items():  # what a writer that started first has half written
        path.write_text(f"first writer's {name}")
    plan.write()
    assert {name: path.read_text() for name, path in staged.items()} == {
        name: f"first writer's {name}" for name in staged
    }
    assert (tmp_path / "env.json").read_text() == '{\n  "A": "1"\n}\n'
    written = {path.name for path in staged.values()} | set(staged)
    assert {path.name for path in tmp_path.iterdir()} == written  # none of this writer's staging files is left
