"""TFLite backend: ai_edge_litert (LiteRT) first, tflite_runtime as the fallback.

XNNPACK is the default path: LiteRT applies it through the AUTO op resolver and it
takes float models whole here, 2.5-8x faster than the built-in kernels. Which nodes it
took is read back from the interpreter's op list (synthetic DELEGATE nodes).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import numpy as np

from ..compat.delegation import delegate_partitions
from ..errors import BackendUnavailableError, InputError, RuntimeFailure, UnsupportedOperatorError
from ..types import Layout, Quantization, TensorSpec
from . import installed_package
from .base import Backend

log = logging.getLogger(__name__)
_PACKAGES = ("ai_edge_litert", "tflite_runtime")


def _import_interpreter(package: str | None):
    package = package or installed_package("tflite")
    if package not in _PACKAGES:
        raise InputError(f"the tflite package option must be one of {_PACKAGES}, got {package!r}")
    try:
        module = importlib.import_module(f"{package}.interpreter")
    except Exception as exc:  # e.g. tflite_runtime 2.14 under numpy 2: "_ARRAY_API not found"
        raise BackendUnavailableError(
            f"cannot import {package}.interpreter: {type(exc).__name__}: {exc}"
            + (" (tflite-runtime 2.14 needs numpy<2)" if package == "tflite_runtime" else ""),
            requested=("tflite",),
        ) from exc
    root = importlib.import_module(package)
    version = getattr(root, "__version__", None) or getattr(module, "__version__", "unknown")
    return module, f"{package} {version}"


def _spec(detail: dict, resized: bool = False) -> TensorSpec:
    # Dynamic dimensions are -1 in the signature and 1 in the allocated shape until resized.
    signature = detail.get("shape_signature")
    dims = signature if not resized and signature is not None and len(signature) else detail["shape"]
    shape = tuple(int(d) for d in dims)
    qp = detail.get("quantization_parameters") or {}
    scales = qp.get("scales")
    quantization = None
    if scales is not None and len(scales):
        quantization = Quantization(
            scales=tuple(float(s) for s in scales),
            zero_points=tuple(int(z) for z in qp["zero_points"]),
            axis=int(qp.get("quantized_dimension", 0)),
        )
    return TensorSpec(
        name=detail["name"],
        shape=shape,
        dtype=np.dtype(detail["dtype"]),
        layout=Layout.NHWC if len(shape) == 4 else Layout.OTHER,
        quantization=quantization,
        index=int(detail["index"]),
    )


class TFLiteBackend(Backend):
    """A model on the TFLite interpreter.

    Args:
        path: the .tflite file (already verified by edgeinf's reader).
        num_threads: interpreter threads (XNNPACK uses the same count).
        package: force ``"ai_edge_litert"`` or ``"tflite_runtime"``; default: the first installed.
        xnnpack: apply the default XNNPACK delegate (True) or run the built-in kernels only.
        reference: run TFLite's reference kernels (slow; the oracle for edgeinf's own kernels).
        model_content: the model bytes, when the caller has already read them.
    """

    name = "tflite"

    def __init__(
        self,
        path,
        *,
        num_threads: int,
        package: str | None = None,
        xnnpack: bool = True,
        reference: bool = False,
        model_content: bytes | None = None,
    ):
        super().__init__()
        module, self.runtime = _import_interpreter(package)
        resolver = module.OpResolverType
        if reference:
            resolver_type = resolver.BUILTIN_REF
        elif xnnpack:
            resolver_type = resolver.AUTO
        else:
            resolver_type = resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        content = model_content if model_content is not None else Path(path).read_bytes()
        try:
            self._interp = module.Interpreter(
                model_content=content, num_threads=num_threads, experimental_op_resolver_type=resolver_type
            )
        except ValueError as exc:  # the resolver refused an op: "Didn't find op for builtin opcode ..."
            raise UnsupportedOperatorError(f"{self.runtime} cannot load {path}: {str(exc).strip()}") from exc
        try:
            self._interp.allocate_tensors()
        except RuntimeError as exc:  # custom/Flex ops and bad shapes fail here, in Prepare
            raise RuntimeFailure(f"{self.runtime} failed to allocate tensors for {path}: {str(exc).strip()}") from exc
        self.num_threads = num_threads
        self._resized: set[int] = set()
        self._read_specs()
        self._read_delegation(xnnpack and not reference)

    def _read_specs(self) -> None:
        self.inputs = tuple(_spec(d, i in self._resized) for i, d in enumerate(self._interp.get_input_details()))
        self.outputs = tuple(_spec(d) for d in self._interp.get_output_details())
        self._input_views = [self._interp.tensor(s.index) for s in self.inputs]
        self._output_indices = [s.index for s in self.outputs]

    def _read_delegation(self, default_delegates: bool) -> None:
        """Which nodes XNNPACK took: ``details["delegate_nodes"]`` holds each delegate
        kernel's node indices (subgraph 0), ``details["cpu_nodes"]`` the rest."""
        try:
            ops = self._interp._get_ops_details()
        except Exception:  # a private API: its absence must not break loading
            log.debug("op details unavailable on %s", self.runtime)
            return
        partitions, cpu_nodes = delegate_partitions(ops)
        self.delegate = "xnnpack" if partitions else None
        self.details["nodes"] = len(ops) - len(partitions)
        self.details["delegate_partitions"] = len(partitions)
        if default_delegates:
            self.details["delegate_nodes"] = [list(p) for p in partitions]
            self.details["cpu_nodes"] = cpu_nodes

    def set_input(self, i: int, array: np.ndarray) -> None:
        self._interp.set_tensor(self.inputs[i].index, array)

    def input_buffer(self, i: int) -> np.ndarray:
        # A view of the interpreter's own input memory. TFLite refuses to invoke while
        # such a view is alive, so callers take a fresh one per frame and drop it.
        return self._input_views[i]()

    def invoke(self) -> list[np.ndarray]:
        try:
            self._interp.invoke()
        except RuntimeError as exc:
            if "reference to internal data" in str(exc):
                raise RuntimeFailure(
                    "an array returned by Model.input_buffer() is still alive: write into it, drop it "
                    "(del), then call invoke()"
                ) from None
            raise RuntimeFailure(f"{self.runtime} invoke failed: {str(exc).strip()}") from exc
        get = self._interp.get_tensor
        return [get(index) for index in self._output_indices]

    def resize_input(self, i: int, shape: tuple[int, ...]) -> None:
        try:
            self._interp.resize_tensor_input(self.inputs[i].index, list(shape), strict=True)
            self._interp.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            raise RuntimeFailure(f"cannot resize input {self.inputs[i].name!r} to {list(shape)}: {exc}") from exc
        self._resized.add(i)
        self._read_specs()

    def close(self) -> None:
        self._input_views = []
        self._interp = None
