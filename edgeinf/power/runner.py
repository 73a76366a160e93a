"""Runs real models for profiling and for the scheduler's loop.

`load_runner` returns an object with ``invoke()`` and ``close()`` whose input is
filled once with fixed data. It uses ``edgeinf.load`` when the model API is present
and otherwise the LiteRT interpreter directly; the rest of `edgeinf.power` only sees
the small `InferenceRunner` protocol, so the two are interchangeable.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import BackendUnavailableError

log = logging.getLogger(__name__)


class InferenceRunner(Protocol):
    def invoke(self) -> None: ...
    def close(self) -> None: ...


def _fill(buffer: np.ndarray, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    if np.issubdtype(buffer.dtype, np.floating):
        buffer[...] = rng.uniform(-1.0, 1.0, buffer.shape).astype(buffer.dtype)
    else:
        info = np.iinfo(buffer.dtype)
        buffer[...] = rng.integers(info.min, info.max, buffer.shape, endpoint=True, dtype=buffer.dtype)


class _ModelRunner:
    def __init__(self, model):
        self.model = model
        for i in range(len(model.inputs)):
            _fill(model.input_buffer(i), seed=7 + i)

    def invoke(self) -> None:
        self.model.invoke()

    def close(self) -> None:
        self.model.close()


class _LiteRtRunner:
    def __init__(self, path: Path, threads: int):
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:
            raise BackendUnavailableError(
                "profiling TFLite models needs ai-edge-litert: pip install 'edgeinf[tflite]'",
                requested=("tflite",),
            ) from None
        self.interpreter = Interpreter(model_path=str(path), num_threads=threads)
        self.interpreter.allocate_tensors()
        for i, detail in enumerate(self.interpreter.get_input_details()):
            data = np.empty(detail["shape"], dtype=detail["dtype"])
            _fill(data, seed=7 + i)
            self.interpreter.set_tensor(detail["index"], data)

    def invoke(self) -> None:
        self.interpreter.invoke()

    def close(self) -> None:
        self.interpreter = None


def load_runner(path: str | Path, backend: str = "tflite", threads: int = 1) -> InferenceRunner:
    """A runner for ``path`` on ``backend`` with ``threads`` threads, input filled with fixed data.

    Raises:
        BackendUnavailableError: the backend's runtime is not installed.
    """
    try:
        from .. import model as model_api
    except ImportError:
        model_api = None
    if model_api is not None and hasattr(model_api, "load"):
        return _ModelRunner(model_api.load(path, backend=backend, num_threads=threads))
    if backend != "tflite":
        raise BackendUnavailableError(
            f"backend {backend!r} needs edgeinf.load; only 'tflite' is available here", (backend,), ("tflite",)
        )
    return _LiteRtRunner(Path(path), threads)
