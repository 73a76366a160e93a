"""Runtime backends: which exist, which can be imported here, which reads what file."""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

from .. import config
from ..errors import BackendUnavailableError, InputError, UnsupportedOperatorError

log = logging.getLogger(__name__)

# backend name -> (file kinds it runs, python packages that provide it, in preference order)
_BACKENDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tflite": (("tflite",), ("ai_edge_litert", "tflite_runtime")),
    "ncnn": (("ncnn",), ("ncnn",)),
    "onnxruntime": (("onnx",), ("onnxruntime",)),
    "edgeinf": (("tflite",), ("edgeinf",)),  # the int8 engine; "auto" measures it against LiteRT
}
# The keywords a user may pass to `edgeinf.load` for each backend (see each backend's class).
_OPTIONS: dict[str, tuple[str, ...]] = {
    "tflite": ("package", "xnnpack", "reference"),
    "ncnn": ("fp16", "light_mode", "vulkan"),
    "onnxruntime": ("optimization",),
    "edgeinf": ("xnnpack", "reference"),  # for LiteRT when the engine falls back to it
}


# The pip extra that installs a backend's runtime, where it is not named after the backend.
_EXTRAS = {"onnxruntime": "onnx"}


def extra_of(backend: str) -> str:
    """The extra of ``pip install 'edgeinf[EXTRA]'`` that brings ``backend``."""
    return _EXTRAS.get(backend, backend)


def known() -> tuple[str, ...]:
    return tuple(_BACKENDS)


def automatic() -> tuple[str, ...]:
    """The backends ``backend="auto"`` chooses from, in preference order.

    The backends ``EDGEINF_BACKENDS`` names come first, then the default order: LiteRT,
    then NCNN, then ONNX Runtime. For a .tflite model with no preference set, `create("auto")`
    measures the int8 engine against LiteRT (`measures_auto`).

    Raises:
        InputError: ``EDGEINF_BACKENDS`` names a backend that does not exist.
    """
    preferred = config.backend_preference()
    unknown = [name for name in preferred if name not in _BACKENDS]
    if unknown:
        raise InputError(
            f"EDGEINF_BACKENDS={','.join(preferred)!r} names unknown backend {unknown[0]!r}: "
            f"expected a comma separated list of {list(_BACKENDS)}"
        )
    default = tuple(b for b in _BACKENDS if b != "edgeinf")
    return tuple(dict.fromkeys(preferred + default))


def measures_auto(backend: str, options) -> bool:
    """Whether ``backend="auto"``, having resolved to ``backend``, measures the int8 engine
    against LiteRT: for LiteRT only, unless the call passes LiteRT options or
    ``EDGEINF_BACKENDS`` sets a preference, and only where the engine's package is installed."""
    return (
        backend == "tflite"
        and not options
        and not os.environ.get("EDGEINF_BACKENDS", "").strip()
        and bool(installed_package("edgeinf"))
    )


def checked_as(backend: str, options) -> tuple[str, str | None]:
    """The backend whose support a model is checked against before it loads on ``backend``,
    and the runtime package the check targets (None: the installed one).

    The int8 engine is checked as LiteRT: what the engine cannot run goes to LiteRT.
    A forced TFLite ``package`` option is the package checked.
    """
    if backend == "edgeinf":
        return "tflite", None
    return backend, (options.get("package") if backend == "tflite" else None)


def kinds_of(backend: str) -> tuple[str, ...]:
    return _BACKENDS[backend][0]


def options_of(backend: str) -> tuple[str, ...]:
    """The load() keywords ``backend`` accepts."""
    return _OPTIONS[backend]


def packages_of(backend: str) -> tuple[str, ...]:
    """The python packages that provide ``backend``, in preference order."""
    return _BACKENDS[backend][1]


def installed_package(backend: str) -> str | None:
    """The first package providing ``backend`` that is installed, without importing it."""
    for package in _BACKENDS[backend][1]:
        if importlib.util.find_spec(package) is not None:
            return package
    return None


def available() -> tuple[str, ...]:
    """Backends whose runtime package is installed on this machine."""
    return tuple(name for name in _BACKENDS if installed_package(name))


def create(backend: str, path, *, num_threads: int, parsed=None, **options):
    """Load ``path`` on ``backend``; options are backend-specific keywords (`options_of`).

    ``parsed`` is edgeinf's verified reading of the file (NCNN and ONNX Runtime use it), when the caller has it.
    Backend ``"auto"`` (a .tflite model, `measures_auto`): the int8 engine when it runs the
    whole model and a timed probe (cached per model and CPU) finds it faster, else LiteRT;
    ``details["auto"]`` says why.
    """
    if backend == "auto":
        from .auto import create_auto

        content = options.get("model_content")
        if parsed is None:
            from ..formats.tflite import read_tflite

            parsed = read_tflite(content if content is not None else Path(path).read_bytes())
        return create_auto(path, content, parsed, num_threads=num_threads)
    if installed_package(backend) is None:
        packages = " or ".join(_BACKENDS[backend][1])
        raise BackendUnavailableError(
            f"backend {backend!r} needs the {packages} package, which is not installed "
            f"(pip install 'edgeinf[{extra_of(backend)}]'); available backends: {list(available()) or 'none'}",
            requested=(backend,),
            available=available(),
        )
    if backend == "edgeinf":
        return _create_engine(path, num_threads=num_threads, parsed=parsed, **options)
    if backend == "tflite":
        from .tflite import TFLiteBackend

        return TFLiteBackend(path, num_threads=num_threads, **options)
    if backend == "onnxruntime":
        from .onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(path, num_threads=num_threads, parsed=parsed, **options)
    from .ncnn import NCNNBackend

    return NCNNBackend(path, num_threads=num_threads, param=parsed, **options)


def _create_engine(path, *, num_threads: int, parsed=None, model_content: bytes | None = None, **fallback_options):
    """The int8 engine on ``path``; when it cannot run every operator exactly, its native
    segments on the engine and the rest on LiteRT, or LiteRT for the whole model when the
    model cannot be split (the reasons are logged and kept in ``details``)."""
    from ..errors import ModelFileError, RuntimeFailure
    from .edgeinf import EngineBackend

    data = model_content if model_content is not None else Path(path).read_bytes()
    if parsed is None:
        from ..formats.tflite import read_tflite

        parsed = read_tflite(data)
    try:
        return EngineBackend(parsed, num_threads=num_threads)
    except UnsupportedOperatorError as exc:
        reason = str(exc)
    try:
        runtime = _create_partitioned(path, data, parsed, num_threads, fallback_options)
    except (UnsupportedOperatorError, ModelFileError, RuntimeFailure, ValueError) as exc:
        log.info("the int8 engine does not run %s, LiteRT does: %s (not split: %s)", path, reason, exc)
        runtime = create("tflite", path, num_threads=num_threads, model_content=data, **fallback_options)
        runtime.details["fallback"] = reason
        runtime.details["not_split"] = str(exc)
        return runtime
    log.info("%s runs on the engine and LiteRT: %s", path, runtime.details["fallback_nodes"])
    return runtime


def _create_partitioned(path, data: bytes, parsed, num_threads: int, options: dict):
    from ..engine import node_support, partition
    from .partitioned import PartitionedBackend

    support = node_support(parsed)
    return PartitionedBackend(
        path, data, parsed, support, partition(parsed, support), num_threads=num_threads, **options
    )
