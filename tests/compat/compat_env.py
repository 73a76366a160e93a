"""Where the compatibility tests find the runtimes' environments (shared by conftest and tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def legacy_python() -> str | None:
    """The numpy<2 interpreter with tflite-runtime 2.14 (.ci/run makes .venv-legacy)."""
    explicit = os.environ.get("EDGEINF_LEGACY_PYTHON")
    candidate = Path(explicit) if explicit else ROOT / ".venv-legacy" / "bin" / "python"
    return str(candidate) if candidate.exists() else None


def need(what: str, hint: str):
    """Fail in CI (which must provide it), skip on a developer machine."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide {what}: {hint}")
    pytest.skip(f"no {what}: {hint}")
