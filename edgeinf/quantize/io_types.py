"""The type of a quantized model's inputs and outputs: int8, uint8 or float.

ai-edge-quantizer gives int8 inputs and outputs. A float interface (a drop-in
replacement for the float model) puts a QUANTIZE after each input and a DEQUANTIZE
before each output; a uint8 interface (cameras give uint8) puts a QUANTIZE that
requantizes between uint8 and int8 at each end: same scale, zero point shifted by 128.
The user-facing tensors keep the original names; the inner int8 ones get ``/int8``.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..formats.tflite_schema import schema
from ..formats.tflite_writer import pack, unpack

IO_TYPES = ("int8", "uint8", "float")


def _opcode(model, name: str, version: int) -> int:
    code = getattr(schema().BuiltinOperator, name)
    for i, oc in enumerate(model.operatorCodes):
        if max(oc.builtinCode, oc.deprecatedBuiltinCode) == code and not oc.customCode:
            oc.version = max(oc.version, version)
            return i
    oc = schema().OperatorCodeT()
    oc.builtinCode = code
    oc.deprecatedBuiltinCode = min(code, 127)
    oc.version = version
    model.operatorCodes.append(oc)
    return len(model.operatorCodes) - 1


def _outer_tensor(inner, io: str):
    s = schema()
    t = s.TensorT()
    t.name = inner.name
    t.shape = None if inner.shape is None else np.array(inner.shape, np.int32)
    t.shapeSignature = None if inner.shapeSignature is None else np.array(inner.shapeSignature, np.int32)
    t.buffer = 0
    if io == "float":
        t.type = s.TensorType.FLOAT32
    else:
        t.type = s.TensorType.UINT8
        q = s.QuantizationParametersT()
        q.scale = list(inner.quantization.scale)
        q.zeroPoint = [int(z) + 128 for z in inner.quantization.zeroPoint]
        t.quantization = q
    name = inner.name.decode() if isinstance(inner.name, bytes) else str(inner.name)
    inner.name = name + "/int8"
    return t


def _wrap_int8(sg, indices, io: str, opcode: int, remap: dict[int, int], *, inbound: bool) -> tuple[list[int], list]:
    """Give each int8 tensor of ``indices`` (the subgraph's inputs or outputs) an outer
    ``io`` tensor and the op between them: outer -> inner when ``inbound``, else inner ->
    outer. Returns the new indices and the ops; ``remap`` records inner -> outer."""
    s = schema()
    new_indices, ops = [], []
    for index in map(int, indices):
        inner = sg.tensors[index]
        if inner.type != s.TensorType.INT8:
            new_indices.append(index)
            continue
        sg.tensors.append(_outer_tensor(inner, io))
        outer = len(sg.tensors) - 1
        remap[index] = outer
        op = s.OperatorT()
        op.opcodeIndex = opcode
        op.inputs, op.outputs = ([outer], [index]) if inbound else ([index], [outer])
        ops.append(op)
        new_indices.append(outer)
    return new_indices, ops


def set_io_type(data: bytes, io: str) -> bytes:
    """Rewrite an int8-interface model's inputs and outputs to ``io`` (int8: unchanged)."""
    if io not in IO_TYPES:
        raise InputError(f"io must be one of {', '.join(IO_TYPES)}, got {io!r}")
    if io == "int8":
        return data
    model = unpack(data)
    sg = model.subgraphs[0]
    into = _opcode(model, "QUANTIZE", 2)
    out_op = _opcode(model, "DEQUANTIZE", 2) if io == "float" else into
    remap: dict[int, int] = {}
    new_inputs, head = _wrap_int8(sg, sg.inputs, io, into, remap, inbound=True)
    new_outputs, tail = _wrap_int8(sg, sg.outputs, io, out_op, remap, inbound=False)
    sg.inputs, sg.outputs = new_inputs, new_outputs
    sg.operators = head + list(sg.operators) + tail
    for sig in model.signatureDefs or []:
        for m in list(sig.inputs or []) + list(sig.outputs or []):
            m.tensorIndex = remap.get(int(m.tensorIndex), int(m.tensorIndex))
    return pack(model)
