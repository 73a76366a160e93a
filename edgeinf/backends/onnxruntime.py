"""ONNX Runtime backend: an .onnx model on the CPU execution provider.

Specs come from the session (names, element types, dynamic dimensions as -1), with
quantization read off the graph: an input consumed only by DequantizeLinear, or an output
made by QuantizeLinear, carries that node's constant scale and zero point (QDQ models;
QOperator models take float inputs and quantize inside). A dynamic dimension needs no
resize on ORT: each run takes the shape it is given.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..errors import InputError, ModelFileError, RuntimeFailure, UnsupportedOperatorError
from ..types import Layout, Quantization, TensorSpec
from .base import OwnedInputsBackend

log = logging.getLogger(__name__)

OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "layout", "all")
"""Graph optimization levels, from none to every one ORT has (ORT's own default is all)."""

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(int16)": np.int16,
    "tensor(uint16)": np.uint16,
    "tensor(int32)": np.int32,
    "tensor(uint32)": np.uint32,
    "tensor(int64)": np.int64,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


def _level(ort, name: str):
    levels = ort.GraphOptimizationLevel
    table = {
        "disable": levels.ORT_DISABLE_ALL,
        "basic": levels.ORT_ENABLE_BASIC,
        "extended": levels.ORT_ENABLE_EXTENDED,
        "all": levels.ORT_ENABLE_ALL,
    }
    # ORT_ENABLE_LAYOUT exists from ORT 1.22: between extended and all.
    table["layout"] = getattr(levels, "ORT_ENABLE_LAYOUT", levels.ORT_ENABLE_EXTENDED)
    if name not in table:
        raise InputError(
            f"the onnxruntime optimization option must be one of {list(OPTIMIZATION_LEVELS)}, got {name!r}"
        )
    return table[name]


def _quantization(parsed, node, scale_at: int, zero_at: int) -> Quantization | None:
    """The constant scale and zero point of a (De)QuantizeLinear node, when both are constants."""
    constants = parsed.constants
    names = node.inputs
    scale = constants.get(names[scale_at]) if len(names) > scale_at else None
    if scale is None:
        return None
    zero = constants.get(names[zero_at]) if len(names) > zero_at and names[zero_at] else None
    scales = np.atleast_1d(scale).astype(np.float64)
    zeros = np.zeros(scales.shape, np.int64) if zero is None else np.atleast_1d(zero).astype(np.int64)
    if zeros.shape != scales.shape:
        return None
    axis = node.attributes.get("axis", 1) if scales.size > 1 else 0
    return Quantization(
        scales=tuple(float(s) for s in scales), zero_points=tuple(int(z) for z in zeros), axis=int(axis)
    )


def _quantizations(parsed) -> tuple[dict[str, Quantization], dict[str, Quantization]]:
    """Quantization of graph inputs read only by DequantizeLinear, and of outputs made by QuantizeLinear."""
    if parsed is None:
        return {}, {}
    readers: dict[str, list] = {}
    for node in parsed.nodes:
        for name in node.inputs:
            readers.setdefault(name, []).append(node)
    inputs = {}
    for value in parsed.inputs:
        nodes = readers.get(value.name, [])
        if nodes and all(n.op_type == "DequantizeLinear" and n.inputs[0] == value.name for n in nodes):
            q = _quantization(parsed, nodes[0], 1, 2)
            if q is not None:
                inputs[value.name] = q
    outputs = {}
    output_names = {v.name for v in parsed.outputs}
    for node in parsed.nodes:
        if node.op_type == "QuantizeLinear" and node.outputs and node.outputs[0] in output_names:
            q = _quantization(parsed, node, 1, 2)
            if q is not None:
                outputs[node.outputs[0]] = q
    return inputs, outputs


def _spec(arg, index: int, quantization: Quantization | None) -> TensorSpec:
    kind = arg.type
    if kind not in _ORT_TYPES:
        raise ModelFileError(f"tensor {arg.name!r} has type {kind}, which edgeinf cannot pass as a numpy array")
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in (arg.shape or ()))
    layout = Layout.NCHW if len(shape) == 4 else Layout.OTHER  # ONNX images are NCHW by convention
    return TensorSpec(arg.name, shape, np.dtype(_ORT_TYPES[kind]), layout, quantization, index)


class OnnxRuntimeBackend(OwnedInputsBackend):
    """A model on onnxruntime.InferenceSession, CPU execution provider.

    Args:
        path: the .onnx file (already verified by edgeinf's reader).
        num_threads: intra-op threads (ORT's inter-op pool is not used: nodes run in order).
        optimization: graph optimization level, one of `OPTIMIZATION_LEVELS` (default ``"all"``).
        parsed: edgeinf's reading of the file (an `OnnxModel`), for quantization facts.
        model_content: the verified bytes of the file; None when the model has external
            data, which ORT then reads beside ``path``.
    """

    name = "onnxruntime"

    def __init__(
        self,
        path,
        *,
        num_threads: int,
        optimization: str = "all",
        parsed=None,
        model_content: bytes | None = None,
    ):
        super().__init__()
        import onnxruntime as ort

        self.runtime = f"onnxruntime {ort.__version__}"
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(num_threads)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = _level(ort, optimization)
        options.log_severity_level = 3  # errors only: ORT warns about every unused initializer
        source = model_content if model_content is not None else str(path)
        try:
            self._session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own Fail / InvalidGraph / NotImplemented types
            raise _load_error(Path(path), self.runtime, exc) from exc
        self.num_threads = int(num_threads)
        self.details.update(optimization=optimization, providers=list(self._session.get_providers()))
        quantized_inputs, quantized_outputs = _quantizations(parsed)
        self.inputs = tuple(
            _spec(arg, i, quantized_inputs.get(arg.name)) for i, arg in enumerate(self._session.get_inputs())
        )
        self.outputs = tuple(
            _spec(arg, i, quantized_outputs.get(arg.name)) for i, arg in enumerate(self._session.get_outputs())
        )
        self._init_inputs()
        self._output_names = [spec.name for spec in self.outputs]

    def invoke(self) -> list[np.ndarray]:
        feeds = {spec.name: array for spec, array in self._fed_inputs()}
        try:
            return self._session.run(self._output_names, feeds)
        except Exception as exc:  # e.g. a shape the graph's Reshape cannot take
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RuntimeFailure(f"{self.runtime} run failed: {first}") from exc

    def close(self) -> None:
        self._session = None
        self._buffers = []


def _load_error(path: Path, runtime: str, exc: Exception) -> Exception:
    """edgeinf's error for a session ORT refused: an operator it lacks, or a model it cannot read."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    kind = type(exc).__name__
    if (
        kind == "NotImplemented"
        or "Could not find an implementation" in text
        or "is not a registered function/op" in text
    ):
        return UnsupportedOperatorError(f"{runtime} cannot run {path.name}: {first}")
    return ModelFileError(f"{runtime} refused {path.name}: {first}")
