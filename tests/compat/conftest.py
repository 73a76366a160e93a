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


@pytest.fixture(scope="session")
def litert_worker():
    pytest.importorskip("ai_edge_litert")
    with RuntimeWorker(sys.executable, "ai_edge_litert", timeout_s=120) as w:
        yield w


@pytest.fixture(scope="session")
def legacy_worker():
    python = legacy_python()
    if python is None:
        need("tflite-runtime 2.14 environment", "run .ci/run or set EDGEINF_LEGACY_PYTHON")
    with RuntimeWorker(python, "tflite_runtime", timeout_s=120) as w:
        yield w


@pytest.fixture(scope="session")
def tflite_workers(litert_worker, legacy_worker):
    """target name for edgeinf.check -> worker running that runtime."""
    return {"ai-edge-litert==2.3.0": litert_worker, "tflite-runtime==2.14.0": legacy_worker}


@pytest.fixture(scope="session")
def ncnn_worker():
    pytest.importorskip("ncnn")
    with RuntimeWorker(sys.executable, "ai_edge_litert", timeout_s=120) as w:
        yield w


@pytest.fixture(scope="session")
def pnnx_binary():
    import importlib.util

    spec = importlib.util.find_spec("pnnx")
    if spec is None or not spec.submodule_search_locations:
        need("pnnx", "pip install --no-deps pnnx==20261020 (the ONNX -> ncnn converter binary)")
    return str(Path(next(iter(spec.submodule_search_locations))) / "pnnx")
