"""Anonymized tasks (``trade data tasks --anonymize``) in a verl run: the model reads no real code or date.

verl renders one tool config into every row's prompt, so the run's ``tools.yaml`` must carry the schemas every
anonymized Episode shows; the rows' prompts are the anonymized ones the tasks folder holds.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from trade_core.testing import run_trade
from trade_tools.anonymize import EXAMPLE_ALIAS, hide_schemas
from trade_tools.episode import DEFAULT_TOOLS
from trade_tools.tool import EXAMPLE_SYMBOL, TOOLS
from trade_train.trainer import RunPlan, TrainSpec
from trade_train.verl_grpo.trainer import VerlGRPO

REAL = re.compile(r"(?:SH|SZ|BJ)\d{6}|(?:19|20)\d{2}[-/.年]", re.IGNORECASE)
"""A real code, or a calendar date or year."""


def plan(tasks: Path, run_dir: Path) -> RunPlan:
    return VerlGRPO().plan(TrainSpec(model="Qwen/Qwen3-4B", tasks=tasks, run_dir=run_dir))


def schemas(plan: RunPlan) -> list[dict]:
    return [entry["tool_schema"] for entry in yaml.safe_load(plan.files["tools.yaml"])["tools"]]


def test_an_anonymized_run_shows_the_schemas_every_anonymized_episode_shows(
    tasks: Path, anonymized_tasks: Path, tmp_path: Path
) -> None:
    plain = schemas(plan(tasks, tmp_path / "plain"))
    assert plain == [TOOLS.all()[name].schema() for name in DEFAULT_TOOLS]  # a plain run's config as it was
    assert EXAMPLE_SYMBOL in json.dumps(plain)
    anonymized = plan(anonymized_tasks, tmp_path / "anonymized")
    assert schemas(anonymized) == hide_schemas(plain)
    assert not REAL.search(anonymized.files["tools.yaml"]) and EXAMPLE_ALIAS in anonymized.files["tools.yaml"]


def test_an_anonymized_runs_prompts_hold_no_real_code_or_date(anonymized_tasks: Path, tmp_path: Path) -> None:
    files = plan(anonymized_tasks, tmp_path / "run").files
    for split in ("train", "val"):
        rows = pq.read_table(io.BytesIO(files[f"{split}.parquet"])).to_pylist()
        assert rows and all(json.loads(row["extra_info"]["task"])["anonymized"] for row in rows)
        texts = [message["content"] for row in rows for message in row["prompt"]]
        assert [REAL.search(text) for text in texts] == [None] * len(texts)


def test_tasks_that_disagree_with_their_manifest_are_refused_in_one_line(
    anonymized_tasks: Path, tmp_path: Path
) -> None:
    """One tool config serves every row: a task whose flag differs from the manifest's would read the wrong one."""
    tasks = shutil.copytree(anonymized_tasks, tmp_path / "tasks")
    manifest = json.loads((tasks / "manifest.json").read_text())
    (tasks / "manifest.json").write_text(json.dumps({**manifest, "anonymized": False}))
    run = run_trade(
        "train", "--model", "Qwen/Qwen3-4B", "--tasks", str(tasks), "--run-dir", str(tmp_path / "run"), "--dry-run"
    )
    assert run.code == 2 and len(run.err.strip().splitlines()) == 1
    assert "some tasks disagree with its manifest on anonymized" in run.err
    assert not (tmp_path / "run").exists()
