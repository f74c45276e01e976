"""trade-eval's README examples run as written on the real data, and its baseline table is what they print."""

from __future__ import annotations

import json
import re
import shlex
import types
from pathlib import Path

import pytest

from trade_core.plugins import get_manager
from trade_core.testing import inline_plugin, run_trade
from trade_eval.policy import POLICIES, RunSettings

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_user_policy_example_works_by_name(backtest) -> None:
    [code] = _blocks("python")
    module = types.ModuleType("readme_policies")
    exec(compile(code, str(README), "exec"), module.__dict__)
    with inline_plugin(get_manager(), module, "readme"):
        policy = POLICIES.get("buy-the-dip")
        records = backtest(20).simulate(policy, RunSettings())
    assert {r.episode_status for r in records} == {"stopped"} and sum(r.orders - r.refused for r in records) > 0


@pytest.mark.real_data
def test_the_baseline_command_runs_as_written_and_prints_the_readme_table(sample_dataset: Path, tmp_path: Path) -> None:
    line = next(line for block in _blocks("bash") for line in block.splitlines() if "--policy momentum" in line)
    (tmp_path / "Q").symlink_to(sample_dataset)
    run = run_trade(*shlex.split(line)[1:], cwd=tmp_path)
    assert run.code == 0, run.err
    [folder] = (tmp_path / "runs").iterdir()
    rows = json.loads((folder / "summary.json").read_text())["rows"]
    table = README.read_text(encoding="utf-8")
    header = next(row for row in table.splitlines() if row.startswith("| | hold |")).split("|")[2:-1]
    total = next(row for row in table.splitlines() if row.startswith("| total return |")).split("|")[2:-1]
    for name, cell in zip(header, total, strict=True):
        if name.strip() in rows:
            assert cell.strip() == f"{rows[name.strip()]['total_return']:+.2%}", name
    assert "CSI300" in run.out and "+18.34%" in run.out


@pytest.mark.real_data
def test_the_blocks_that_run_as_written_print_what_the_readme_shows(sample_dataset: Path, tmp_path: Path) -> None:
    """Each ```bash block marked "runs as written" runs in one folder (blocks in order, `Q` the real data); the
    ```text block after it holds lines its commands printed."""
    (tmp_path / "Q").symlink_to(sample_dataset)
    pairs = re.findall(
        r"```bash\n(# runs as written[^\n]*\n.*?)```\n```text\n(.*?)```", README.read_text("utf-8"), re.S
    )
    assert len(pairs) == 3
    for block, shown in pairs:
        printed = []
        for line in block.splitlines()[1:]:
            run = run_trade(*shlex.split(line)[1:], cwd=tmp_path)
            assert run.code == 0, (line, run.err)
            printed.append(run.out)
        for expected in shown.splitlines():
            assert expected in "\n".join(printed), expected
