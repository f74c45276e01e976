"""What is not verl's lives outside ``verl_grpo/``: the TRL trainer and the quickstart import nothing of it."""

from __future__ import annotations

import ast
from pathlib import Path

import trade_train

SOURCE = Path(trade_train.__file__).parent
VERL_GRPO = "trade_train.verl_grpo"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_only_verls_adapter_imports_verl_grpo() -> None:
    outside = [path for path in SOURCE.rglob("*.py") if "verl_grpo" not in path.relative_to(SOURCE).parts]
    reaching = {
        str(path.relative_to(SOURCE)): sorted(m for m in imported_modules(path) if m.startswith(VERL_GRPO))
        for path in outside
    }
    allowed = {"plugin.py", "commands/train.py"}  # the verl trainer's registration and `trade train export`
    assert {path: modules for path, modules in reaching.items() if modules and path not in allowed} == {}
