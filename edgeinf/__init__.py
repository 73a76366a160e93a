"""edgeinf: fast, safe, power-aware neural network inference on edge boards.

>>> import edgeinf
>>> model = edgeinf.load("face_detection_short_range.tflite")   # doctest: +SKIP
>>> outputs = model.run(image)                                   # doctest: +SKIP

``import edgeinf`` imports no runtime: TFLite and NCNN are imported when a model
is first loaded on them.
"""

from .errors import (
    BackendUnavailableError,
    EdgeInfError,
    FetchError,
    InputError,
    ModelClosedError,
    ModelFileError,
    RuntimeFailure,
    SensorError,
    UnsupportedOperatorError,
)
from .types import Layout, Quantization, TensorSpec

__version__ = "0.1.0"


def __getattr__(name):
    # Lazy: the model and checker modules stay unimported until first used.
    if name in ("load", "Model", "available_backends"):
        from . import model

        return getattr(model, name)
    if name == "check":
        from .compat import check

        return check
    if name == "ABTest":
        from .ab import ABTest

        return ABTest
    if name == "Pipeline":
        from .pipeline import Pipeline

        return Pipeline
    if name in ("metrics", "bench", "quantize", "sources", "pipeline"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'edgeinf' has no attribute {name!r}")


__all__ = [
    "ABTest",
    "BackendUnavailableError",
    "EdgeInfError",
    "FetchError",
    "InputError",
    "Layout",
    "Model",
    "ModelClosedError",
    "ModelFileError",
    "Pipeline",
    "Quantization",
    "RuntimeFailure",
    "SensorError",
    "TensorSpec",
    "UnsupportedOperatorError",
    "__version__",
    "available_backends",
    "check",
    "load",
]
