"""The package graph in the README is the real one: read from every import (ast) and every pyproject.

A package's source may import what its pyproject declares (``dependencies`` and its extras); its tests that and
its dependency groups. Every declared package of ours must be imported, every import declared, and each must
point to a package the README lists above it, so nothing imports upward. The README's block is then compared
with the one rendered from the real graph: only the descriptions are the README's own.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {path.parent.name: path.parent for path in sorted(ROOT.glob("packages/*/pyproject.toml"))}
HEADING = "### Packages and plugins\n```\n"
INDENT = " " * 16


def requirement(text: str) -> str:
    """The distribution a requirement names: ``trade-eval[local]>=0.1`` -> ``trade-eval``."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)
    assert match, text
    return match.group(0).lower().replace("_", "-")


def declared(package: str) -> dict[str, str]:
    """Each package of ours that ``package`` declares, with how: "" (always), ``[extra]`` or ``tests``."""
    project = tomllib.loads((PACKAGES[package] / "pyproject.toml").read_text(encoding="utf-8"))
    how = {requirement(r): "" for r in project["project"].get("dependencies", [])}
    for extra, requirements in project["project"].get("optional-dependencies", {}).items():
        for name in map(requirement, requirements):
            how.setdefault(name, f"[{extra}]")
    for requirements in project.get("dependency-groups", {}).values():
        for name in map(requirement, requirements):
            how.setdefault(name, "tests")
    return {name: kind for name, kind in how.items() if name in PACKAGES and name != package}


def imported(package: str, part: str) -> set[str]:
    """The packages of ours that the files under ``part`` (src, tests) of ``package`` import, lazily or not;
    a folder with its own pyproject (a test's throwaway plugin) is a distribution of its own and left out."""
    top = PACKAGES[package] / part
    own = [path.parent for path in top.rglob("pyproject.toml")]
    found = set()
    for path in top.rglob("*.py"):
        if any(folder in path.parents for folder in own):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules = [node.module]
            else:
                continue
            found.update(module.split(".")[0].replace("_", "-") for module in modules)
    return found & PACKAGES.keys() - {package}


def readme_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert HEADING in text, "the README has no package graph under '### Packages and plugins'"
    return text.split(HEADING, 1)[1].split("```", 1)[0]


def listed() -> dict[str, str]:
    """The README's packages in its order, with their descriptions."""
    lines = [line for line in readme_block().splitlines() if line and not line.startswith(" ")]
    return dict(line.split(None, 1) for line in lines)


def render(descriptions: dict[str, str]) -> str:
    """The block for these packages in this order: each with what it declares, as the pyprojects say."""
    lines = []
    for package, description in descriptions.items():
        lines.append(f"{package:<16}{description}")
        how = declared(package)
        parts = [", ".join(name for name in descriptions if how.get(name) == "")]
        extras = sorted({kind for kind in how.values() if kind.startswith("[")})
        parts += [f"with {extra} " + ", ".join(n for n in descriptions if how.get(n) == extra) for extra in extras]
        if "tests" in how.values():
            parts.append("its tests " + ", ".join(name for name in descriptions if how.get(name) == "tests"))
        if any(parts):
            lines.append(INDENT + "imports " + "; ".join(part for part in parts if part))
    return "\n".join(lines) + "\n"


def test_every_import_of_ours_is_declared_and_every_declaration_used() -> None:
    wrong = {}
    for package in PACKAGES:
        how = declared(package)
        source, tests = imported(package, "src"), imported(package, "tests")
        allowed_in_source = {name for name, kind in how.items() if kind != "tests"}
        problems = {
            "source imports undeclared": sorted(source - allowed_in_source),
            "tests import undeclared": sorted(tests - how.keys()),
            "declared, imported nowhere": sorted(how.keys() - source - tests),
            "a test dependency the source imports too": sorted(source & {n for n, k in how.items() if k == "tests"}),
        }
        if problems := {what: names for what, names in problems.items() if names}:
            wrong[package] = problems
    assert wrong == {}


def test_nothing_imports_upward() -> None:
    order = list(listed())
    assert sorted(order) == sorted(PACKAGES), "the README lists every package once"
    upward = {
        package: sorted(name for name in declared(package) if order.index(name) > order.index(package))
        for package in order
    }
    assert {package: names for package, names in upward.items() if names} == {}


def test_the_readme_shows_the_real_graph() -> None:
    assert readme_block() == render(listed()), "paste the rendered block into README.md:\n" + render(listed())
