"""Static int8 post-training quantization with ai-edge-quantizer, on a prepared model.

int8 activations (asymmetric), symmetric int8 weights (per output channel by default),
int32 biases: TFLite's int8 scheme. Ranges are the min/max over every calibration
sample: with the library's default moving average the first few samples would set the
ranges, and the ranges of a small calibration set would depend on its order.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Sequence

import numpy as np

from ..errors import BackendUnavailableError, EdgeInfError, InputError, UnsupportedOperatorError
from ..formats.tflite_schema import schema
from ..formats.tflite_writer import unpack
from .prepare import SIGNATURE_KEY, opcode_name

log = logging.getLogger(__name__)
REQUIREMENT = "ai-edge-quantizer==0.10.0"
# Operators that only move quantized data between float and int8, or carry no values.
_CONVERSIONS = {"QUANTIZE", "DEQUANTIZE"}


def _library():
    try:
        from ai_edge_quantizer import calibrator, qtyping, quantizer, recipe_manager
        from ai_edge_quantizer.utils import qsv_utils
    except ImportError as exc:
        raise BackendUnavailableError(
            f"quantizing needs ai-edge-quantizer: pip install 'edgeinf[quantize]' ({REQUIREMENT}); {exc}",
            requested=("ai_edge_quantizer",),
        ) from None
    return calibrator, qtyping, quantizer, recipe_manager, qsv_utils


def quantize_prepared(
    prepared: bytes,
    samples: Sequence[np.ndarray],
    input_name: str,
    per_channel: bool,
    progress=None,
    output_ranges: dict[str, tuple[float, float]] | None = None,
) -> bytes:
    """Calibrate a prepared float model on ``samples`` (input 0 tensors) and quantize it to int8.

    ``output_ranges`` (output name -> (min, max)) clips the calibrated range of an output
    and of the tensors it only rearranges (`range_path`). The library's own progress bars
    and size report are silenced; ``progress`` (a `calibration.Progress`) is stepped once
    per sample instead.
    """
    calibrator, qtyping, quantizer, recipe_manager, qsv_utils = _library()
    granularity = qtyping.QuantGranularity.CHANNELWISE if per_channel else qtyping.QuantGranularity.TENSORWISE
    manager = recipe_manager.RecipeManager()
    manager.add_static_config(
        regex=".*",
        operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
        activation_num_bits=8,
        weight_num_bits=8,
        weight_granularity=granularity,
    )
    buffer = bytearray(prepared)
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors.*")
            calib = calibrator.Calibrator(bytes(buffer), num_threads=1, qsv_update_func=qsv_utils.min_max_update)
            for tensor in samples:
                calib.calibrate({SIGNATURE_KEY: [{input_name: tensor}]}, manager)
                if progress is not None:
                    progress.step()  # its stream is the real stderr, taken before the redirection
            qsvs = calib.get_model_qsvs()
            for name, (lo, hi) in (output_ranges or {}).items():
                for tensor_name in range_path(prepared, name):
                    if tensor_name in qsvs:
                        qsvs[tensor_name] = {
                            "min": np.maximum(qsvs[tensor_name]["min"], np.float32(lo)),
                            "max": np.minimum(qsvs[tensor_name]["max"], np.float32(hi)),
                        }
            q = quantizer.Quantizer(buffer, manager.get_quantization_recipe())
            result = q.quantize(qsvs, enable_progress_bar=False, enable_progress_report=False)
    except EdgeInfError:
        raise
    except (ValueError, KeyError, NotImplementedError, RuntimeError) as exc:
        raise UnsupportedOperatorError(
            f"ai-edge-quantizer could not quantize this model: {type(exc).__name__}: {exc}"
        ) from None
    return bytes(result.quantized_model)


# Operators whose output carries the same values as their inputs (only rearranged): a range
# stated for the output holds for their inputs too.
_SAME_VALUES = {"RESHAPE", "CONCATENATION", "SQUEEZE", "TRANSPOSE", "GATHER", "STRIDED_SLICE", "SLICE"}


def range_path(data: bytes, output: str) -> list[str]:
    """Names of the tensor ``output`` and of the tensors that reach it only through rearranging ops."""
    model = unpack(data)
    sg = model.subgraphs[0]
    names = [_str(t.name) for t in sg.tensors]
    writer = {int(o): op for op in sg.operators for o in op.outputs}
    if output not in names:
        raise InputError(f"no tensor named {output!r} to set a range for; outputs: {[names[i] for i in sg.outputs]}")
    found, todo = [], [names.index(output)]
    while todo:
        index = todo.pop()
        found.append(names[index])
        op = writer.get(index)
        if op is not None and opcode_name(model, op.opcodeIndex) in _SAME_VALUES:
            todo += [int(i) for i in op.inputs[: 1 if opcode_name(model, op.opcodeIndex) != "CONCATENATION" else None]]
    return found


def _str(raw) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def float_operators(data: bytes) -> list[str]:
    """Operators of a quantized model that still compute in float, as ``"NAME (node N, output 'x')"``."""
    model = unpack(data)
    sg = model.subgraphs[0]
    float32 = schema().TensorType.FLOAT32
    found = []
    for node, op in enumerate(sg.operators):
        name = opcode_name(model, op.opcodeIndex)
        if name in _CONVERSIONS:
            continue
        if any(i >= 0 and sg.tensors[i].type == float32 for i in list(op.outputs)):
            out = sg.tensors[int(op.outputs[0])].name
            out = out.decode() if isinstance(out, bytes) else out
            found.append(f"{name} (node {node}, output {out!r})")
    return found


def is_quantized(data: bytes) -> bool:
    """Whether a model already computes in int8/uint8/int16: a non-constant quantized tensor feeds an operator."""
    model = unpack(data)
    types = schema().TensorType
    quantized = {types.INT8, types.UINT8, types.INT16}
    for sg in model.subgraphs:
        for op in sg.operators:
            for i in list(op.inputs):
                if i < 0:
                    continue
                t = sg.tensors[i]
                constant = (
                    bool(t.buffer) and model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data)
                )
                if (
                    t.type in quantized
                    and not constant
                    and t.quantization is not None
                    and t.quantization.scale is not None
                ):
                    return True
    return False
