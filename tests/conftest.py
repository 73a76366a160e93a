"""Shared fixtures: real models from the package registry (cached), seeded RNG; a test
that needs an optional runtime this environment lacks is skipped, naming it."""

from __future__ import annotations

import importlib.util
import shutil
import sys

import numpy as np
import pytest

from edgeinf import backends, zoo
from edgeinf.errors import BackendUnavailableError

# Packages of the optional extras (pyproject.toml): a test whose model needs one of them
# runs where it is installed and is skipped, with the package named, where it is not.
OPTIONAL_PACKAGES = frozenset(
    {"ai_edge_litert", "tflite_runtime", "ncnn", "onnx", "onnxruntime", "ai_edge_quantizer", "serial", "gi"}
)


def _installed(package: str) -> bool:
    """Whether ``package`` is installed: a folder of the same name on the path (such as
    tests/onnx, on the path as a namespace package) is not the package."""
    if package in sys.modules and sys.modules[package] is None:
        return False
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


# Without the onnx package, `import onnx` would find this folder's onnx/ tests as a namespace
# package: make it fail as it does in an application.
if not _installed("onnx"):
    sys.modules["onnx"] = None  # type: ignore[assignment]


def _missing_runtime(exc: BaseException | None) -> str | None:
    """Why ``exc`` (or an exception it was raised from) means a runtime is not installed here."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BackendUnavailableError) and not any(
            b in backends.known() and backends.installed_package(b) for b in exc.requested
        ):
            return f"runtime not installed: {', '.join(exc.requested) or 'none available'}"
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.split(".")[0]
            if top in OPTIONAL_PACKAGES and not _installed(top):
                return f"optional package not installed: {top}"
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test (or its fixture) that fails only because an optional runtime is missing is a skip.

    Where the runtime is installed nothing changes: the condition checks that it is absent.
    """
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        reason = _missing_runtime(call.excinfo.value)
        if reason is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")


@pytest.fixture(scope="session")
def model_path():
    """Function fixture: model_path("face_detection_short_range") -> cached Path."""
    return zoo.path


@pytest.fixture
def esr(model_path, tmp_path):
    """A private copy of the Real-ESRGAN NCNN pair, m.param and m.bin (tests may damage it)."""
    src = model_path("realesr_animevideov3_x2")
    shutil.copy(src, tmp_path / "m.param")
    shutil.copy(src.with_suffix(".bin"), tmp_path / "m.bin")
    return tmp_path / "m.param"


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
