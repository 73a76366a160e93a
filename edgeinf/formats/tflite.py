"""Read a .tflite file, verified first, without importing any runtime.

The whole flatbuffer is verified against the TFLite schema layout (every offset,
vtable, vector and string inside the buffer), then the graph is checked for the
index errors that make runtimes crash (opcode, tensor, buffer and subgraph indices
in range, external buffers inside the file, constant data sizes matching shapes)
while it is read into plain frozen dataclasses, and the result for the data-flow
rules (`tflite_graph`) and each node's operator requirements (`tflite_ops`).

The layout comes from the schema module ai-edge-litert ships (see
``tools/gen_tflite_layout.py``), stored as data in ``tflite_layout.json``, so reading
works on a device that has only tflite-runtime (which ships no schema module).

>>> m = read_tflite("face_detection_short_range.tflite")     # doctest: +SKIP
>>> m.subgraphs[0].operators[2].opcode.name, m.subgraphs[0].operators[2].opcode.version   # doctest: +SKIP
('CONV_2D', 1)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from ..errors import ModelFileError
from ._files import read_model_file
from ._flatbuf import Table, Verifier, load_layout
from .tflite_graph import check_graph
from .tflite_ops import check_operators

SCHEMA_VERSION = 3  # the only version every TFLite runtime accepts
FILE_IDENTIFIER = b"TFL3"
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127
MAX_ACTIVATION_BYTES = 2**31 - 1  # runtimes index tensors with int32; no edge model needs more

# Bytes per element (fractions for packed sub-byte types); None: variable size.
_DTYPE_BYTES = {
    "FLOAT32": 4, "FLOAT16": 2, "INT32": 4, "UINT8": 1, "INT64": 8, "STRING": None, "BOOL": 1,
    "INT16": 2, "COMPLEX64": 8, "INT8": 1, "FLOAT64": 8, "COMPLEX128": 16, "UINT64": 8,
    "RESOURCE": None, "VARIANT": None, "UINT32": 4, "UINT16": 2, "INT4": 0.5, "BFLOAT16": 2,
    "INT2": 0.25, "UINT4": 0.5, "FLOAT8_E4M3FN": 1, "FLOAT8_E5M2": 1,
}  # fmt: skip
_NUMPY_DTYPE = {
    "FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8", "INT64": "int64",
    "BOOL": "bool", "INT16": "int16", "COMPLEX64": "complex64", "INT8": "int8", "FLOAT64": "float64",
    "COMPLEX128": "complex128", "UINT64": "uint64", "UINT32": "uint32", "UINT16": "uint16", "STRING": "object",
}  # fmt: skip

PathOrBytes = Union[str, os.PathLike, bytes, bytearray, memoryview]


def _seq(values) -> tuple:
    """A scalar vector from the reader (tuple or numpy array) as a tuple of Python numbers."""
    if values is None:
        return ()
    return values if isinstance(values, tuple) else tuple(values.tolist())


def _layout() -> dict:
    return load_layout("tflite_layout")


def _names(enum: str) -> dict[int, str]:
    return {v: k for k, v in _layout()["enums"][enum].items()}


@dataclass(frozen=True)
class OperatorCode:
    """One entry of the model's operator code table.

    Attributes:
        index: position in the table.
        code: the real builtin code, ``max(builtin_code, deprecated_builtin_code)``.
        name: builtin name (``"CONV_2D"``), ``"CUSTOM"``, or ``"UNKNOWN_<code>"`` for codes
            newer than the schema this reader was generated from.
        version: the operator version the converter wrote.
        custom_code: the custom op's name for CUSTOM, else None.
    """

    index: int
    code: int
    name: str
    version: int
    custom_code: str | None = None

    @property
    def is_custom(self) -> bool:
        return self.name == "CUSTOM"

    @property
    def is_flex(self) -> bool:
        """A Select TensorFlow op (needs the Flex delegate, absent from tflite-runtime)."""
        return self.is_custom and (self.custom_code or "").startswith("Flex")

    @property
    def key(self) -> str:
        """``tflite:CONV_2D`` or ``tflite:CUSTOM:MyOp``."""
        return f"tflite:CUSTOM:{self.custom_code}" if self.is_custom else f"tflite:{self.name}"


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization of a tensor (scales and zero points, per tensor or per channel)."""

    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    quantized_dimension: int = 0
    min: tuple[float, ...] = ()
    max: tuple[float, ...] = ()
    details: str | None = None  # a custom quantization scheme's table name, if any

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1


@dataclass(frozen=True)
class Sparsity:
    """A sparse constant tensor's encoding (needs DENSIFY or a sparse-aware kernel)."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dim_formats: tuple[str, ...]  # DENSE | SPARSE_CSR per traversed dimension


@dataclass(frozen=True)
class Tensor:
    """A tensor of one subgraph.

    Attributes:
        shape: static shape (dynamic dimensions hold 1 here, -1 in ``shape_signature``).
        shape_signature: shape with -1 for dynamic dimensions, or None if the file has none.
        dtype: TFLite type name, e.g. ``"FLOAT32"``, ``"INT8"``, ``"FLOAT16"``.
        buffer: index into the model's buffers (0 is the empty sentinel).
        data_size: bytes of constant data (0 for activations).
    """

    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None
    dtype: str
    buffer: int
    data_size: int
    is_variable: bool = False
    quantization: QuantParams | None = None
    sparsity: Sparsity | None = None
    has_rank: bool = False

    @property
    def is_constant(self) -> bool:
        return self.data_size > 0

    @property
    def is_dynamic(self) -> bool:
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)

    @property
    def numpy_dtype(self) -> np.dtype | None:
        name = _NUMPY_DTYPE.get(self.dtype)
        return None if name is None else np.dtype(name)

    @property
    def num_elements(self) -> int:
        return math.prod(max(d, 0) for d in self.shape)

    @property
    def nbytes(self) -> int:
        """Dense size in bytes from the static shape (0 for variable-size types)."""
        per = _DTYPE_BYTES.get(self.dtype)
        return 0 if per is None else math.ceil(self.num_elements * per)


@dataclass(frozen=True)
class Operator:
    """One node. ``inputs`` may hold -1 for an absent optional input.

    Attributes:
        options_type: the builtin options table's name (``"Conv2DOptions"``) or None.
        options: the options' scalar and scalar-vector fields by schema name
            (``{"padding": 1, "stride_w": 2, ...}``); fields absent from the file hold
            the schema default.
        custom_options_size: bytes of custom options (custom ops).
    """

    index: int
    opcode: OperatorCode
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...] = ()
    options_type: str | None = None
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    custom_options_size: int = 0


@dataclass(frozen=True)
class Subgraph:
    index: int
    name: str
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Signature:
    key: str
    subgraph_index: int
    inputs: dict[str, int]  # signature name -> tensor index in that subgraph
    outputs: dict[str, int]


@dataclass(frozen=True)
class TfliteModel:
    """A verified .tflite model.

    Attributes:
        file_size: bytes of the file.
        schema_version: the file's schema version (always 3 once read).
        opcodes: the operator code table.
        subgraphs: subgraph 0 is the main graph; others are bodies of control flow ops.
        buffer_sizes: bytes of data in each buffer (external ones included).
        signatures: the signature defs.
        metadata: name -> raw bytes of each metadata buffer.
        min_runtime_version: the converter's ``min_runtime_version`` metadata, if any.
    """

    path: str | None
    file_size: int
    schema_version: int
    description: str | None
    opcodes: tuple[OperatorCode, ...]
    subgraphs: tuple[Subgraph, ...]
    buffer_sizes: tuple[int, ...]
    signatures: tuple[Signature, ...]
    metadata: dict[str, bytes]
    min_runtime_version: str | None
    _buffer_spans: tuple[tuple[int, int], ...] = field(default=(), repr=False, compare=False)
    _data: Any = field(default=None, repr=False, compare=False)

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]

    @property
    def weight_bytes(self) -> int:
        return sum(self.buffer_sizes)

    def buffer_data(self, index: int) -> memoryview:
        """The raw bytes of buffer ``index`` (empty for activations)."""
        start, size = self._buffer_spans[index]
        return memoryview(self._data)[start : start + size]

    def tensor_data(self, subgraph: int, tensor: int) -> np.ndarray | None:
        """A constant tensor's data as a numpy array of its shape (None if not constant or packed)."""
        t = self.subgraphs[subgraph].tensors[tensor]
        dtype = t.numpy_dtype
        if not t.is_constant or dtype is None or t.sparsity is not None or t.dtype == "STRING":
            return None
        return np.frombuffer(self.buffer_data(t.buffer), dtype=dtype.newbyteorder("<")).reshape(t.shape)


def _load(path_or_bytes: PathOrBytes, name: Union[str, os.PathLike, None]) -> tuple[bytes, str | None, str]:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        if name is not None:
            return bytes(path_or_bytes), str(name), Path(name).name
        return bytes(path_or_bytes), None, "model bytes"
    path = Path(path_or_bytes)
    return read_model_file(path, "a .tflite file"), str(path), path.name


def read_tflite(path_or_bytes: PathOrBytes, name: Union[str, os.PathLike, None] = None) -> TfliteModel:
    """Verify and read a .tflite model.

    Args:
        path_or_bytes: a file path or the file's bytes.
        name: the file the bytes were read from, for messages (a path names itself).

    Returns:
        The model's opcodes, subgraphs, tensors, buffers, signatures and metadata.

    Raises:
        ModelFileError: the file is missing, not a TFLite flatbuffer, truncated, has
            offsets or indices out of range, a graph that breaks the data-flow rules
            (`tflite_graph`), or a node its operator's kernel cannot take
            (`tflite_ops`); the message names the file, the field and the values.

    >>> model = read_tflite(zoo.path("face_detection_short_range"))   # doctest: +SKIP
    >>> model.opcodes[0].name                                          # doctest: +SKIP
    'CONV_2D'
    """
    data, path, what = _load(path_or_bytes, name)
    if len(data) < 8:
        raise ModelFileError(f"{what}: {len(data)} bytes is too short for a .tflite flatbuffer (needs at least 8)")
    if data[4:8] != FILE_IDENTIFIER:
        raise ModelFileError(f"{what}: not a .tflite file: bytes 4..8 are {data[4:8]!r}, expected {FILE_IDENTIFIER!r}")
    layout = _layout()
    root_pos = Verifier(data, layout, what).root(layout["root_table"])
    model = _Reader(data, path, what, layout).read(root_pos)
    check_graph(model, what)
    check_operators(model, what)
    return model


class _Reader:
    def __init__(self, data: bytes, path: str | None, what: str, layout: dict):
        self.data, self.path, self.what, self.layout = data, path, what, layout
        self.op_names = _names("BuiltinOperator")
        self.type_names = _names("TensorType")
        self.dim_names = _names("DimensionType")

    def fail(self, message: str) -> None:
        raise ModelFileError(f"{self.what}: {message}")

    def read(self, root_pos: int) -> TfliteModel:
        model = Table(self.data, root_pos, "Model", self.layout)
        version = model.get("version")
        if version != SCHEMA_VERSION:
            self.fail(f"schema version is {version}, expected {SCHEMA_VERSION}")
        spans = self.buffers(model.get("buffers") or [])
        opcodes = tuple(self.opcode(i, t) for i, t in enumerate(model.get("operator_codes") or []))
        raw_subgraphs = model.get("subgraphs") or []
        if not raw_subgraphs:
            self.fail("has no subgraphs, expected at least one")
        subgraphs = tuple(self.subgraph(i, t, opcodes, spans) for i, t in enumerate(raw_subgraphs))
        signatures = tuple(self.signature(i, t, subgraphs) for i, t in enumerate(model.get("signature_defs") or []))
        metadata = {}
        for i, meta in enumerate(model.get("metadata") or []):
            buf = meta.get("buffer")
            if buf >= len(spans):
                self.fail(f"metadata[{i}] {meta.get('name')!r} names buffer {buf}, out of range 0..{len(spans) - 1}")
            start, size = spans[buf]
            metadata[meta.get("name") or f"metadata_{i}"] = self.data[start : start + size]
        mrv = metadata.get("min_runtime_version")
        return TfliteModel(
            path=self.path,
            file_size=len(self.data),
            schema_version=version,
            description=model.get("description"),
            opcodes=opcodes,
            subgraphs=subgraphs,
            buffer_sizes=tuple(size for _, size in spans),
            signatures=signatures,
            metadata=metadata,
            min_runtime_version=mrv.rstrip(b"\0").decode("ascii", "replace") if mrv else None,
            _buffer_spans=spans,
            _data=self.data,
        )

    def buffers(self, tables: list[Table]) -> tuple[tuple[int, int], ...]:
        spans = []
        for i, buf in enumerate(tables):
            span = buf.vector_span("data")
            offset, size = buf.get("offset"), buf.get("size")
            if offset > 1:  # data stored after the flatbuffer (models over 2 GB); offset 1 is a placeholder
                if offset + size > len(self.data):
                    self.fail(
                        f"buffer {i} claims bytes {offset}..{offset + size} outside the file "
                        f"(truncated at byte {len(self.data)})"
                    )
                spans.append((offset, size))
            else:
                spans.append(span if span is not None else (0, 0))
        return tuple(spans)

    def opcode(self, index: int, t: Table) -> OperatorCode:
        code = max(t.get("builtin_code"), t.get("deprecated_builtin_code"))
        if code < 0:
            self.fail(f"operator code {index} has builtin code {code}, expected >= 0")
        name = self.op_names.get(code, f"UNKNOWN_{code}")
        custom = t.get("custom_code") if name == "CUSTOM" else None
        return OperatorCode(index=index, code=code, name=name, version=t.get("version"), custom_code=custom)

    def subgraph(self, g: int, t: Table, opcodes, spans) -> Subgraph:
        raw_tensors = t.get("tensors") or []
        n = len(raw_tensors)
        tensors = tuple(self.tensor(g, i, rt, spans) for i, rt in enumerate(raw_tensors))

        def check_indices(values, where: str, optional: bool) -> tuple[int, ...]:
            out = _seq(values)
            for k, v in enumerate(out):
                if not (0 <= v < n or (optional and v == -1)):
                    self.fail(f"subgraph {g} {where}[{k}]: tensor index {v} out of range 0..{n - 1}")
            return out

        operators = []
        for j, op in enumerate(t.get("operators") or []):
            oi = op.get("opcode_index")
            if oi >= len(opcodes):
                self.fail(f"subgraph {g} operator {j}: opcode index {oi} out of range 0..{len(opcodes) - 1}")
            options = op.get("builtin_options") or op.get("builtin_options2")
            custom = op.vector_span("custom_options")
            custom_size = custom[1] if custom else int(op.get("large_custom_options_size"))
            if custom is None and op.get("large_custom_options_offset") > 1:
                end = op.get("large_custom_options_offset") + custom_size
                if end > len(self.data):
                    self.fail(f"subgraph {g} operator {j}: custom options end at byte {end}, past the file's end")
            operators.append(
                Operator(
                    index=j,
                    opcode=opcodes[oi],
                    inputs=check_indices(op.get("inputs"), f"operator {j} ({opcodes[oi].name}) inputs", True),
                    outputs=check_indices(op.get("outputs"), f"operator {j} ({opcodes[oi].name}) outputs", True),
                    intermediates=check_indices(op.get("intermediates"), f"operator {j} intermediates", True),
                    options_type=options[0] if options else None,
                    options=options[1].to_dict() if options else {},
                    custom_options_size=custom_size,
                )
            )
        return Subgraph(
            index=g,
            name=t.get("name") or "",
            tensors=tensors,
            operators=tuple(operators),
            inputs=check_indices(t.get("inputs"), "inputs", False),
            outputs=check_indices(t.get("outputs"), "outputs", False),
        )

    def tensor(self, g: int, i: int, t: Table, spans) -> Tensor:
        name = t.get("name") or ""
        dtype = self.type_names.get(t.get("type"), f"UNKNOWN_{t.get('type')}")
        buffer = t.get("buffer")
        if buffer >= len(spans):
            self.fail(f"subgraph {g} tensor {i} {name!r}: buffer index {buffer} out of range 0..{len(spans) - 1}")
        shape = _seq(t.get("shape"))
        sig = t.get("shape_signature")
        signature = None if sig is None else _seq(sig)
        if any(d < 0 for d in shape):
            self.fail(
                f"subgraph {g} tensor {i} {name!r}: shape {list(shape)} has a negative dimension "
                "(a dynamic dimension is 1 in the shape and -1 in shape_signature)"
            )
        if signature is not None and any(d < -1 for d in signature):
            self.fail(f"subgraph {g} tensor {i} {name!r}: shape_signature {list(signature)} has a dimension below -1")
        if signature is not None and len(signature) != len(shape):
            self.fail(
                f"subgraph {g} tensor {i} {name!r}: shape {list(shape)} and shape_signature {list(signature)} differ in rank"
            )
        quant = self.quantization(g, i, name, t.get("quantization"), shape)
        sparsity = self.sparsity(t.get("sparsity"))
        data_size = spans[buffer][1]
        tensor = Tensor(
            index=i,
            name=name,
            shape=shape,
            shape_signature=signature,
            dtype=dtype,
            buffer=buffer,
            data_size=data_size,
            is_variable=bool(t.get("is_variable")),
            quantization=quant,
            sparsity=sparsity,
            has_rank=bool(t.get("has_rank")),
        )
        per = _DTYPE_BYTES.get(dtype)
        if not data_size and tensor.nbytes > MAX_ACTIVATION_BYTES:
            self.fail(
                f"subgraph {g} tensor {i} {name!r} {dtype}{list(shape)} needs {tensor.nbytes} bytes, more than "
                f"the {MAX_ACTIVATION_BYTES} edgeinf accepts for a tensor computed at run time"
            )
        if data_size and per is not None and sparsity is None:
            expected = tensor.nbytes
            if data_size != expected:
                self.fail(
                    f"subgraph {g} tensor {i} {name!r} {dtype}{list(shape)} needs {expected} bytes of data, "
                    f"its buffer {buffer} has {data_size}"
                )
        return tensor

    def quantization(self, g, i, name, q: Table | None, shape) -> QuantParams | None:
        if q is None:
            return None
        scales = q.get("scale")
        zeros = q.get("zero_point")
        details = q.get("details")
        if (scales is None or len(scales) == 0) and details is None:
            return None  # an empty table: float tensors often carry one
        scales = _seq(scales)
        zeros = _seq(zeros)
        qd = q.get("quantized_dimension")
        if zeros and len(zeros) != len(scales):
            self.fail(f"subgraph {g} tensor {i} {name!r}: {len(scales)} scales but {len(zeros)} zero points")
        if len(scales) > 1:
            if not 0 <= qd < max(len(shape), 1):
                self.fail(
                    f"subgraph {g} tensor {i} {name!r}: quantized_dimension {qd} out of range 0..{len(shape) - 1}"
                )
            if shape and shape[qd] != len(scales):
                self.fail(
                    f"subgraph {g} tensor {i} {name!r}: {len(scales)} per-channel scales but dimension {qd} "
                    f"of shape {list(shape)} is {shape[qd]}"
                )
        mins, maxs = q.get("min"), q.get("max")
        return QuantParams(
            scales=scales,
            zero_points=zeros,
            quantized_dimension=qd,
            min=_seq(mins),
            max=_seq(maxs),
            details=None if details is None else details[0],
        )

    def sparsity(self, s: Table | None) -> Sparsity | None:
        if s is None:
            return None
        order = s.get("traversal_order")
        block = s.get("block_map")
        dims = s.get("dim_metadata") or []
        return Sparsity(
            traversal_order=_seq(order),
            block_map=_seq(block),
            dim_formats=tuple(self.dim_names.get(d.get("format"), "?") for d in dims),
        )

    def signature(self, k: int, t: Table, subgraphs) -> Signature:
        g = t.get("subgraph_index")
        if g >= len(subgraphs):
            self.fail(f"signature {k}: subgraph index {g} out of range 0..{len(subgraphs) - 1}")
        n = len(subgraphs[g].tensors)

        def maps(items, where):
            out = {}
            for m in items or []:
                idx = m.get("tensor_index")
                if idx >= n:
                    self.fail(f"signature {k} {where} {m.get('name')!r}: tensor index {idx} out of range 0..{n - 1}")
                out[m.get("name") or ""] = idx
            return out

        return Signature(
            key=t.get("signature_key") or "",
            subgraph_index=g,
            inputs=maps(t.get("inputs"), "input"),
            outputs=maps(t.get("outputs"), "output"),
        )
