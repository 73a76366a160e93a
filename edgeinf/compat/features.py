"""The attributes of a TFLite node that decide whether a delegate takes it.

The XNNPACK table (tools/probe_xnnpack.py) records, for probe models, these features
and whether XNNPACK took the node; the checker computes the same features for each
node of a user's model and looks them up. Probe and checker share this one function,
so they can never disagree on what a feature means.

Features:
    dtype       TFLite type of the data input (the first, except for SPLIT and TRANSPOSE_CONV).
    static      one letter per input: ``C`` constant (data in the file, or the output of a
                DEQUANTIZE/DENSIFY of a constant, which XNNPACK and TFLite fold as
                "quasi-static"), ``R`` computed at run time, ``-`` absent.
    rank        rank of the data input.
    dynamic     some input or output has a dynamic (-1) dimension.
    activation  fused activation (``NONE``, ``RELU``, ...), where the op has one.
    plus op-specific options (beta, alpha, filter, stride, dilation, padding, keep_dims,
    keep_num_dims, align_corners, half_pixel_centers, new_shape, n_inputs, sparse; STRIDED_SLICE's
    unit_strides, shrink_axis, masks (begin or end), new_axis (or ellipsis), offset).
    weights     type of a weight, filter or slope input, with ``/per-channel`` when it is
                quantized per channel (``INT8/per-channel``).
    output      QUANTIZE's output type (float to int8, or int8 to int8: a requantization).
    slope       PRELU's slope shape against its input: ``scalar`` (one value), ``channel``
                (``[C]``, ``[1,1,C]``, ...: one value per channel), ``full`` (anything broader).
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..formats._flatbuf import load_layout
from ..formats.tflite import Operator, Subgraph, TfliteModel

_QUASI_STATIC_PRODUCERS = ("DEQUANTIZE", "DENSIFY")


# ops whose data input is not the first (SPLIT: axis first; TRANSPOSE_CONV: output shape first)
_DATA_INPUT = {"SPLIT": 1, "TRANSPOSE_CONV": 2}


def _weights(sg: Subgraph, tensor: int) -> str:
    t = sg.tensors[tensor]
    q = t.quantization
    return t.dtype + ("/per-channel" if q is not None and q.per_channel else "")


def _slope_form(slope: tuple[int, ...]) -> str:
    if math.prod(slope) == 1:
        return "scalar"
    return "channel" if all(d == 1 for d in slope[:-1]) else "full"


@lru_cache(maxsize=1)
def _enum_names(enum: str) -> dict[int, str]:
    return {v: k for k, v in load_layout("tflite_layout")["enums"][enum].items()}


def static_tensors(sg: Subgraph) -> set[int]:
    """Tensors whose value is known before the first invoke (constants and quasi-static)."""
    static = {t.index for t in sg.tensors if t.is_constant}
    readers: dict[int, list] = {}  # DEQUANTIZE(DENSIFY(const)) chains in any node order
    for op in sg.operators:
        if op.opcode.name in _QUASI_STATIC_PRODUCERS and op.inputs:
            readers.setdefault(op.inputs[0], []).append(op)
    pending = [t for t in static if t in readers]
    while pending:
        for op in readers[pending.pop()]:
            for t in op.outputs:
                if t not in static:
                    static.add(t)
                    if t in readers:
                        pending.append(t)
    return static


def node_features(model: TfliteModel, sg: Subgraph, op: Operator, static: set[int] | None = None) -> dict[str, object]:
    """The features of one node (see the module docstring)."""
    if static is None:
        static = static_tensors(sg)
    tensors = sg.tensors
    present = [i for i in op.inputs if i >= 0]
    data_input = _DATA_INPUT.get(op.opcode.name, 0)
    first = tensors[op.inputs[data_input]] if len(op.inputs) > data_input and op.inputs[data_input] >= 0 else None
    f: dict[str, object] = {
        "dtype": first.dtype if first is not None else "NONE",
        "static": "".join("-" if i < 0 else ("C" if i in static else "R") for i in op.inputs),
        "rank": len(first.shape) if first is not None else 0,
        "dynamic": any(tensors[i].is_dynamic for i in present + [o for o in op.outputs if o >= 0]),
    }
    o = op.options
    if "fused_activation_function" in o:
        f["activation"] = _enum_names("ActivationFunctionType").get(o["fused_activation_function"], "?")
    name = op.opcode.name
    if name == "SOFTMAX":
        f["beta"] = float(o.get("beta", 0.0))
    elif name == "LEAKY_RELU":
        f["alpha"] = round(float(o.get("alpha", 0.0)), 6)
    elif name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        f["filter"] = f"{o.get('filter_height', 0)}x{o.get('filter_width', 0)}"
        f["stride"] = f"{o.get('stride_h', 0)}x{o.get('stride_w', 0)}"
        f["padding"] = _enum_names("Padding").get(o.get("padding", 0), "?")
    elif name in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
        f["stride"] = f"{o.get('stride_h', 1)}x{o.get('stride_w', 1)}"
        f["dilation"] = f"{o.get('dilation_h_factor', 1)}x{o.get('dilation_w_factor', 1)}"
        f["padding"] = _enum_names("Padding").get(o.get("padding", 0), "?")
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            f["weights"] = _weights(sg, op.inputs[1])
    elif name == "FULLY_CONNECTED":
        f["keep_num_dims"] = bool(o.get("keep_num_dims", False))
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            f["weights"] = _weights(sg, op.inputs[1])
    elif name == "PRELU" and len(op.inputs) > 1 and op.inputs[1] >= 0:
        f["weights"] = _weights(sg, op.inputs[1])
        f["slope"] = _slope_form(tensors[op.inputs[1]].shape)
    elif name in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"):
        f["keep_dims"] = bool(o.get("keep_dims", False))
    elif name == "RESHAPE":
        f["new_shape"] = "new_shape" in o and len(o["new_shape"]) > 0
    elif name == "RESIZE_BILINEAR":
        f["align_corners"] = bool(o.get("align_corners", False))
        f["half_pixel_centers"] = bool(o.get("half_pixel_centers", False))
    elif name == "CONCATENATION":
        f["n_inputs"] = len(op.inputs)
    elif name == "STRIDED_SLICE":
        if len(op.inputs) > 3 and op.inputs[3] >= 0:
            strides = model.tensor_data(sg.index, op.inputs[3])
            f["unit_strides"] = None if strides is None else bool((strides == 1).all())
        f["shrink_axis"] = bool(o.get("shrink_axis_mask", 0))
        f["masks"] = bool(o.get("begin_mask", 0) or o.get("end_mask", 0))
        f["new_axis"] = bool(o.get("new_axis_mask", 0) or o.get("ellipsis_mask", 0))
        f["offset"] = bool(o.get("offset", False))
    elif name == "QUANTIZE" and op.outputs and op.outputs[0] >= 0:
        f["output"] = tensors[op.outputs[0]].dtype  # a requantization when both are integer
    elif name == "DENSIFY":
        f["sparse"] = bool(present) and tensors[present[0]].sparsity is not None
    return f
