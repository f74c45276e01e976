"""Write trade-tools' Alpha158 table from the installed pyqlib, or check it against pyqlib (``--check``).

trade-tools ships Alpha158's names and expressions (packages/trade-tools/src/trade_tools/alpha158.json) so that
it installs and runs without pyqlib and its ~200 dependencies: its own engine evaluates the expressions, and
Qlib was only ever read for their text. This script is the table's one source; rerun it when the pyqlib pin
moves. It needs pyqlib (``pip install pyqlib==0.9.7``) and is no part of the package.

    python scripts/alpha158_table.py            # rewrite the table
    python scripts/alpha158_table.py --check    # exit 1 when the shipped table differs from pyqlib's
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trade_core.files import atomic_write

TABLE = Path(__file__).resolve().parents[1] / "packages" / "trade-tools" / "src" / "trade_tools" / "alpha158.json"


def from_qlib() -> dict[str, object]:
    """The table as the installed pyqlib's ``Alpha158DL.get_feature_config()`` (default config) gives it."""
    try:
        import qlib
        from qlib.contrib.data.loader import Alpha158DL
    except ImportError:
        print("error: pyqlib is not installed (pip install pyqlib==0.9.7)", file=sys.stderr)
        sys.exit(2)
    fields, names = Alpha158DL.get_feature_config()
    about = (
        f"Alpha158's factor names and expressions in Qlib's order, generated from pyqlib {qlib.__version__}'s "
        "qlib.contrib.data.loader.Alpha158DL.get_feature_config() with its default config by "
        "scripts/alpha158_table.py; rerun that script rather than editing this file."
    )
    return {"about": about, "factors": dict(zip(names, fields, strict=True))}


def check(expected: dict[str, str]) -> None:
    """Exit 1 with one line naming the factors whose expression (or place) differs from ``expected``."""
    shipped = json.loads(TABLE.read_text(encoding="utf-8"))["factors"] if TABLE.exists() else {}
    changed = [name for name in dict.fromkeys([*expected, *shipped]) if shipped.get(name) != expected.get(name)]
    if changed or list(shipped) != list(expected):
        named = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        sys.exit(
            f"{TABLE.name} differs from pyqlib's Alpha158 ({named or 'order'}): rerun python scripts/alpha158_table.py"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare the shipped table with pyqlib's; write nothing")
    args = parser.parse_args()
    table = from_qlib()
    if args.check:
        check(table["factors"])  # type: ignore[arg-type]
    else:
        atomic_write(TABLE, json.dumps(table, indent=2) + "\n")
        print(f"wrote {TABLE}")


if __name__ == "__main__":
    main()
