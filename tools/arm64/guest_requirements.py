"""Print, one per line, what the emulated Pi Python needs to run the test suite.

The list is read from pyproject.toml (the core dependencies and the extras the tests use),
so the emulated environment follows the project's own requirements. The legacy TFLite
runtime is left out: it needs numpy<2 in an environment of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

GUEST_EXTRAS = ("tflite", "ncnn", "onnx", "serial", "demo", "test")


def guest_requirements(pyproject: Path) -> list[str]:
    import tomllib  # Python 3.11+, which every supported host (Debian 12 and 13) has

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    wanted = list(project.get("dependencies", []))
    for extra in GUEST_EXTRAS:
        wanted += project.get("optional-dependencies", {}).get(extra, [])
    unique = []
    for requirement in wanted:
        if not requirement.startswith("edgeinf") and requirement not in unique:
            unique.append(requirement)
    return unique


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    print("\n".join(guest_requirements(root / "pyproject.toml")))
