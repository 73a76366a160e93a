"""Fixtures for the compatibility tests: runtime workers in child processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compat_env import legacy_python, need  # noqa: E402
from runtime_worker import RuntimeWorker  # noqa: E402


def _session_worker(python: str, package: str):
    """A worker child process in ``python`` (``package`` runs its TFLite jobs), for the session."""
    with RuntimeWorker(python, package, timeout_s=120) as worker:
        yield worker


@pytest.fixture(scope="session")
def litert_worker():
    pytest.importorskip("ai_edge_litert")
    yield from _session_worker(sys.executable, "ai_edge_litert")


@pytest.fixture(scope="session")
def legacy_worker():
    python = legacy_python()
    if python is None:
        need("tflite-runtime 2.14 environment", "run .ci/run or set EDGEINF_LEGACY_PYTHON")
    yield from _session_worker(python, "tflite_runtime")


@pytest.fixture(scope="session")
def tflite_workers(litert_worker, legacy_worker):
    """target name for edgeinf.check -> worker running that runtime."""
    return {"ai-edge-litert==2.3.0": litert_worker, "tflite-runtime==2.14.0": legacy_worker}


@pytest.fixture(scope="session")
def ncnn_worker():
    pytest.importorskip("ncnn")
    yield from _session_worker(sys.executable, "ai_edge_litert")  # ncnn jobs need no TFLite package


@pytest.fixture(scope="session")
def pnnx_binary():
    import importlib.util

    spec = importlib.util.find_spec("pnnx")
    if spec is None or not spec.submodule_search_locations:
        need("pnnx", "pip install --no-deps pnnx==20261020 (the ONNX -> ncnn converter binary)")
    return str(Path(next(iter(spec.submodule_search_locations))) / "pnnx")
