"""edgeinf's own .tflite writer: small models for tests, and edits of real models.

Built on the Object API of the generated TFLite schema module (`tflite_schema.schema`)
and ``flatbuffers.Builder``. Constant data is placed 16-byte aligned, as the TFLite
converter does.

>>> import numpy as np
>>> from edgeinf.formats.tflite_writer import TensorDef, OpDef, build_model
>>> data = build_model(
...     [TensorDef("a", (1, 4), "float32"), TensorDef("b", (1, 4), "float32", data=np.ones((1, 4), np.float32)),
...      TensorDef("out", (1, 4), "float32")],
...     [OpDef("ADD", [0, 1], [2])], inputs=[0], outputs=[2])
>>> data[4:8]
b'TFL3'
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import flatbuffers
import numpy as np

from .tflite_schema import schema

log = logging.getLogger(__name__)

_NUMPY_TO_TFLITE = {
    "float32": "FLOAT32", "float16": "FLOAT16", "int32": "INT32", "uint8": "UINT8", "int64": "INT64",
    "bool": "BOOL", "int16": "INT16", "complex64": "COMPLEX64", "int8": "INT8", "float64": "FLOAT64",
    "complex128": "COMPLEX128", "uint64": "UINT64", "uint32": "UINT32", "uint16": "UINT16",
}  # fmt: skip
_CUSTOM_CODE = 32  # BuiltinOperator.CUSTOM
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127
_DATA_ALIGNMENT = 16


@dataclass
class TensorDef:
    """A tensor to write.

    Attributes:
        name: tensor name.
        shape: static shape (use 1 for a dynamic dimension and -1 in ``shape_signature``).
        dtype: numpy dtype (``"int8"``, ``np.float32``) or TFLite type name (``"INT8"``, ``"INT4"``).
        data: constant data (a numpy array whose size matches shape and dtype), else None.
        scale, zero_point: quantization, per tensor (scalars) or per channel (sequences).
        quantized_dimension: the channel axis for per-channel quantization.
        shape_signature: shape with -1 for dynamic dimensions.
    """

    name: str
    shape: tuple[int, ...]
    dtype: Union[str, np.dtype]
    data: np.ndarray | None = None
    scale: float | Sequence[float] | None = None
    zero_point: int | Sequence[int] | None = None
    quantized_dimension: int = 0
    shape_signature: tuple[int, ...] | None = None


@dataclass
class OpDef:
    """An operator to write.

    Attributes:
        op: builtin name (``"CONV_2D"``), or the custom code when ``custom`` is True.
        inputs, outputs: tensor indices; -1 marks an absent optional input.
        options: a schema ``*OptionsT`` object (e.g. ``Conv2DOptionsT``); its
            ``builtin_options_type`` is inferred from the class.
        version: the operator version to record.
        custom: write a CUSTOM op named ``op``.
        custom_options: raw custom options bytes (flexbuffer), for custom ops.
    """

    op: str
    inputs: list[int]
    outputs: list[int]
    options: Any = None
    version: int = 1
    custom: bool = False
    custom_options: bytes | None = None


def tflite_type(dtype: Union[str, np.dtype, type]) -> int:
    """TensorType enum value for a numpy dtype or a TFLite type name."""
    types = schema().TensorType
    if isinstance(dtype, str) and dtype.isupper():
        name = dtype
    else:
        npname = np.dtype(dtype).name
        if npname not in _NUMPY_TO_TFLITE:
            raise ValueError(f"dtype {npname} has no TFLite tensor type; expected one of {sorted(_NUMPY_TO_TFLITE)}")
        name = _NUMPY_TO_TFLITE[npname]
    if not hasattr(types, name):
        raise ValueError(f"unknown TFLite tensor type {name!r}")
    return getattr(types, name)


def builtin_code(op: str) -> int:
    """BuiltinOperator value of a builtin name such as ``"CONV_2D"``."""
    ops = schema().BuiltinOperator
    if not hasattr(ops, op) or op.startswith("_"):
        raise ValueError(f"unknown builtin op {op!r}; expected a BuiltinOperator name such as 'CONV_2D' or custom=True")
    return getattr(ops, op)


def options_type(options: Any) -> tuple[str, int]:
    """(union field, type value) for a schema ``*OptionsT`` object: which of the two
    builtin options unions holds it."""
    s = schema()
    cls = type(options).__name__
    if not cls.endswith("T"):
        raise ValueError(f"options must be a schema *OptionsT object (e.g. Conv2DOptionsT), got {cls}")
    name = cls[:-1]
    if hasattr(s.BuiltinOptions, name):
        return "builtinOptions", getattr(s.BuiltinOptions, name)
    if hasattr(s.BuiltinOptions2, name):
        return "builtinOptions2", getattr(s.BuiltinOptions2, name)
    raise ValueError(f"{cls} is not a member of BuiltinOptions or BuiltinOptions2")


def _element_bytes(type_value: int, count: int) -> int | None:
    t = schema().TensorType
    sub_byte = {t.INT4: 2, t.UINT4: 2, t.INT2: 4}
    if type_value in sub_byte:
        return -(-count // sub_byte[type_value])
    return None


def _tensor(td: TensorDef, buffer_index: int, data_bytes: int | None):
    s = schema()
    t = s.TensorT()
    t.name = td.name
    t.shape = np.asarray(td.shape, dtype=np.int32)
    t.type = tflite_type(td.dtype)
    t.buffer = buffer_index
    if td.shape_signature is not None:
        if len(td.shape_signature) != len(td.shape):
            raise ValueError(
                f"tensor {td.name!r}: shape_signature {td.shape_signature} and shape {td.shape} differ in rank"
            )
        t.shapeSignature = np.asarray(td.shape_signature, dtype=np.int32)
    if td.scale is not None:
        q = s.QuantizationParametersT()
        q.scale = [float(v) for v in np.atleast_1d(np.asarray(td.scale, dtype=np.float64))]
        zp = td.zero_point if td.zero_point is not None else [0] * len(q.scale)
        q.zeroPoint = [int(v) for v in np.atleast_1d(np.asarray(zp, dtype=np.int64))]
        if len(q.zeroPoint) != len(q.scale):
            raise ValueError(f"tensor {td.name!r}: {len(q.scale)} scales but {len(q.zeroPoint)} zero points")
        q.quantizedDimension = int(td.quantized_dimension)
        t.quantization = q
    return t


class _AlignedBufferT:
    """A Buffer whose data vector is 16-byte aligned (the generated Pack aligns to 1)."""

    def __init__(self, data: bytes | None):
        self.data = data

    def Pack(self, builder):  # noqa: N802 (the Object API's method name)
        s = schema()
        vector = None
        if self.data:
            n = len(self.data)
            builder.StartVector(1, n, _DATA_ALIGNMENT)
            builder.head = builder.head - n
            builder.Bytes[builder.head : builder.head + n] = self.data
            vector = builder.EndVector()
        s.BufferStart(builder)
        if vector is not None:
            s.BufferAddData(builder, vector)
        return s.BufferEnd(builder)


def build_model(
    tensors: list[TensorDef],
    ops: list[OpDef],
    inputs: list[int],
    outputs: list[int],
    signature_key: str | None = None,
) -> bytes:
    """Write a one-subgraph .tflite model.

    Args:
        tensors: every tensor; indices in ops/inputs/outputs refer to this list.
        ops: operators in execution order.
        inputs, outputs: the subgraph's input and output tensor indices.
        signature_key: also write a signature def with this key (names = tensor names).

    Returns:
        The .tflite file's bytes.

    Raises:
        ValueError: an index out of range, an unknown op or dtype, or data whose size
            does not match its tensor.
    """
    s = schema()
    n = len(tensors)

    def check(indices, where, optional=False):
        for k, v in enumerate(indices):
            if not (0 <= v < n or (optional and v == -1)):
                raise ValueError(f"{where}[{k}] is tensor {v}, expected 0..{n - 1}{' or -1' if optional else ''}")

    check(inputs, "inputs")
    check(outputs, "outputs")
    model = s.ModelT()
    model.version = 3
    model.description = "edgeinf tflite_writer"
    buffers = [_AlignedBufferT(None)]  # buffer 0: the empty sentinel every tensor without data points to
    tensor_objs = []
    for i, td in enumerate(tensors):
        buffer_index = 0
        if td.data is not None:
            raw = np.ascontiguousarray(td.data)
            type_value = tflite_type(td.dtype)
            count = int(np.prod(td.shape, dtype=np.int64))
            packed = _element_bytes(type_value, count)
            expected = packed if packed is not None else count * np.dtype(raw.dtype).itemsize
            if packed is None and raw.size != count:
                raise ValueError(
                    f"tensor {i} {td.name!r}: data has {raw.size} elements, shape {td.shape} needs {count}"
                )
            if raw.nbytes != expected:
                raise ValueError(f"tensor {i} {td.name!r}: data has {raw.nbytes} bytes, expected {expected}")
            buffers.append(_AlignedBufferT(raw.astype(raw.dtype.newbyteorder("<"), copy=False).tobytes()))
            buffer_index = len(buffers) - 1
        tensor_objs.append(_tensor(td, buffer_index, None))

    opcode_index: dict[tuple, int] = {}
    opcodes: list[object] = []
    op_objs = []
    for j, od in enumerate(ops):
        check(od.inputs, f"op {j} ({od.op}) inputs", optional=True)
        check(od.outputs, f"op {j} ({od.op}) outputs")
        key = (od.custom, od.op, od.version)
        if key not in opcode_index:
            oc = s.OperatorCodeT()
            if od.custom:
                oc.builtinCode = _CUSTOM_CODE
                oc.deprecatedBuiltinCode = _CUSTOM_CODE
                oc.customCode = od.op
            else:
                code = builtin_code(od.op)
                oc.builtinCode = code
                oc.deprecatedBuiltinCode = min(code, _PLACEHOLDER_FOR_GREATER_OP_CODES)
            oc.version = int(od.version)
            opcode_index[key] = len(opcodes)
            opcodes.append(oc)
        op = s.OperatorT()
        op.opcodeIndex = opcode_index[key]
        op.inputs = [int(v) for v in od.inputs]
        op.outputs = [int(v) for v in od.outputs]
        if od.options is not None:
            union, value = options_type(od.options)
            setattr(op, union, od.options)
            setattr(op, union + "Type", value)
        if od.custom_options is not None:
            op.customOptions = np.frombuffer(bytes(od.custom_options), dtype=np.uint8)
        op_objs.append(op)

    subgraph = s.SubGraphT()
    subgraph.name = "main"
    subgraph.tensors = tensor_objs
    subgraph.operators = op_objs
    subgraph.inputs = [int(v) for v in inputs]
    subgraph.outputs = [int(v) for v in outputs]
    model.subgraphs = [subgraph]
    model.operatorCodes = opcodes
    model.buffers = buffers
    if signature_key is not None:
        sig = s.SignatureDefT()
        sig.signatureKey = signature_key
        sig.subgraphIndex = 0
        sig.inputs = [_tensor_map(tensors[i].name, i) for i in inputs]
        sig.outputs = [_tensor_map(tensors[i].name, i) for i in outputs]
        model.signatureDefs = [sig]
    return pack(model)


def _tensor_map(name: str, index: int):
    m = schema().TensorMapT()
    m.name = name
    m.tensorIndex = index
    return m


def pack(model) -> bytes:
    """Serialize a schema ``ModelT`` to .tflite bytes, with 16-byte aligned buffers."""
    for i, buf in enumerate(model.buffers or []):
        if not isinstance(buf, _AlignedBufferT):
            data = None if buf.data is None else np.asarray(buf.data, dtype=np.uint8).tobytes()
            if getattr(buf, "offset", 0) > 1:
                raise ValueError(f"buffer {i} is stored outside the flatbuffer; rewriting such models is not supported")
            model.buffers[i] = _AlignedBufferT(data)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def unpack(data: bytes):
    """A .tflite file's bytes as a mutable schema ``ModelT``, verified first (the Object API
    trusts offsets). Buffers stored after the flatbuffer (``offset``/``size``, as
    ai-edge-quantizer writes them) are read back into the model, so that it packs again."""
    from ..errors import ModelFileError
    from .tflite import read_tflite

    read_tflite(data)
    model = schema().ModelT.InitFromPackedBuf(bytearray(data), 0)
    for i, buf in enumerate(model.buffers or []):
        if getattr(buf, "offset", 0) > 1:
            end = buf.offset + buf.size
            if end > len(data):
                raise ModelFileError(
                    f"buffer {i} lies at bytes {buf.offset}..{end}, past the end of the file ({len(data)})"
                )
            buf.data = np.frombuffer(data[buf.offset : end], np.uint8)
            buf.offset = buf.size = 0
    return model


# ---- edits of real models, for the proof tests ------------------------------------------------


def set_op_version(data: bytes, op: str, version: int) -> bytes:
    """Record every ``op`` (builtin name) at ``version`` (e.g. past what an older runtime has)."""
    model = unpack(data)
    code = builtin_code(op)
    hits = 0
    for oc in model.operatorCodes:
        if max(oc.builtinCode, oc.deprecatedBuiltinCode) == code:
            oc.version = int(version)
            hits += 1
    if not hits:
        raise ValueError(f"the model has no {op} operator")
    return pack(model)


def insert_custom_op(data: bytes, custom_code: str, before_op: int | None = None) -> bytes:
    """Insert a custom op (a pass-through of operator ``before_op``'s first input) ahead of it.

    The new op reads that tensor and writes a copy with the same type and shape, which
    the old op then reads instead; nothing else changes. By default ``before_op`` is the
    first operator reading the model's first input.
    """
    s = schema()
    model = unpack(data)
    sg = model.subgraphs[0]
    if before_op is None:
        first_input = int(sg.inputs[0])
        before_op = next((j for j, op in enumerate(sg.operators) if first_input in list(op.inputs)), 0)
    target = sg.operators[before_op]
    src = int(target.inputs[0])
    old = sg.tensors[src]
    copy = s.TensorT()
    copy.name = f"{_name(old.name)}/{custom_code}"
    copy.shape = None if old.shape is None else np.array(old.shape, dtype=np.int32)
    copy.shapeSignature = None if old.shapeSignature is None else np.array(old.shapeSignature, dtype=np.int32)
    copy.type = old.type
    copy.buffer = 0
    copy.quantization = old.quantization
    sg.tensors.append(copy)
    new_index = len(sg.tensors) - 1
    target.inputs = [new_index] + [int(v) for v in target.inputs[1:]]
    oc = s.OperatorCodeT()
    oc.builtinCode = _CUSTOM_CODE
    oc.deprecatedBuiltinCode = _CUSTOM_CODE
    oc.customCode = custom_code
    oc.version = 1
    model.operatorCodes.append(oc)
    op = s.OperatorT()
    op.opcodeIndex = len(model.operatorCodes) - 1
    op.inputs = [src]
    op.outputs = [new_index]
    sg.operators.insert(before_op, op)
    return pack(model)


def make_dim_dynamic(data: bytes, tensor: int | None = None, dim: int = 0) -> bytes:
    """Mark dimension ``dim`` of a tensor (default: the first input) dynamic (-1 in its
    shape signature), as converters do for a free batch size."""
    model = unpack(data)
    sg = model.subgraphs[0]
    index = int(sg.inputs[0]) if tensor is None else tensor
    t = sg.tensors[index]
    sig = np.array(t.shape if t.shapeSignature is None else t.shapeSignature, dtype=np.int32)
    sig[dim] = -1
    t.shapeSignature = sig
    return pack(model)


def _name(raw) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
