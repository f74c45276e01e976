"""The root README's `trade tools` examples run as written on the real sample (the README's `Q`)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from trade_core.testing import run_trade

README = Path(__file__).resolve().parents[1] / "README.md"
PLAY_COMMANDS = ("get_price_data", "get_macro_indicators", "compute_alpha_factor", "TakeAction", "buy", "sell", "stop")


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}\n")
    return text[start : text.find("\n### ", start + 1)]


def test_the_play_example_runs_as_written(sample_dataset: Path, tmp_path: Path) -> None:
    section = _section("Trade a day with the agent's tools")
    commands = [shlex.split(line) for line in section.splitlines() if line.startswith("trade ")]
    typed = [span for span in re.findall(r"`([^`\n]+)`", section) if span.split()[0] in PLAY_COMMANDS]
    assert [c[:3] for c in commands] == [["trade", "tools", "list"], ["trade", "tools", "play"]] and len(typed) == 3
    (tmp_path / "Q").symlink_to(sample_dataset)
    assert run_trade(*commands[0][1:], cwd=tmp_path).code == 0
    run = run_trade(*commands[1][1:], cwd=tmp_path, input="\n".join(typed) + "\n")
    assert run.code == 0, run.err
    answers = run.out[run.out.rindex("stop [REASON]") :].splitlines()
    assert not [line for line in answers if line.startswith("错误：")], run.out
    [saved] = tmp_path.glob("*.jsonl")
    episode = json.loads(saved.read_text())["episode"]
    assert episode["status"] == "stopped" and [a["type"] for a in episode["actions"]] == ["buy", "stop"]
