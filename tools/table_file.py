"""What the support-table generators in tools/ share: where the tables live, how one is
written, and reading a source file at a named commit of a git checkout.

Importing this module puts the repository first on ``sys.path``, so that the tools run
from a checkout with the edgeinf next to them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TABLES = ROOT / "edgeinf" / "compat" / "tables"


def write_table(path: Path, table: dict, summary: str, *, sort_keys: bool = True) -> None:
    """Write ``table`` as the JSON the package reads (one-space indent, a final newline)
    and print its path with ``summary``."""
    path.write_text(json.dumps(table, indent=1, sort_keys=sort_keys) + "\n", encoding="utf-8")
    print(f"{path}: {summary}")


def git_show(checkout: Path, rev: str, path: str) -> tuple[str, str]:
    """The text of ``path`` at ``rev`` in a git checkout (or bare repository), and the
    commit ``rev`` names."""
    git = ["git", "-C", str(checkout)]
    text = subprocess.run(git + ["show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout
    commit = subprocess.run(git + ["rev-parse", rev], capture_output=True, text=True, check=True).stdout.strip()
    return text, commit
