"""Read an .onnx model with the ``onnx`` package (imported only when called).

Every node with its domain, op type and the opset version of its schema, the
initializers with their sizes, and the graph inputs and outputs with dynamic
dimensions marked (a name or -1 where the file has no fixed value).

>>> m = read_onnx("PP-OCRv6_det_small.onnx")    # doctest: +SKIP
>>> m.opsets, m.inputs[0].shape                   # doctest: +SKIP
({'ai.onnx': 11}, ('DynamicDimension.0', 3, 'DynamicDimension.1', 'DynamicDimension.2'))
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from ..errors import BackendUnavailableError, ModelFileError
from ._files import read_model_file

DEFAULT_DOMAIN = "ai.onnx"


@dataclass(frozen=True)
class OnnxValue:
    """A graph input, output or initializer. ``shape`` holds ints, dim names, or -1."""

    name: str
    dtype: str  # numpy name ("float32") or the ONNX type name when numpy has none
    shape: tuple[Any, ...] | None

    @property
    def is_dynamic(self) -> bool:
        return self.shape is None or any(not isinstance(d, int) or d < 0 for d in self.shape)


@dataclass(frozen=True)
class OnnxNode:
    """One node. ``since_version`` is the opset version of the schema that applies, None if
    the op is unknown to the installed onnx (custom domains)."""

    index: int
    name: str
    domain: str
    op_type: str
    since_version: int | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: dict[str, Any] = field(default_factory=dict, compare=False)
    has_subgraph: bool = False

    @property
    def key(self) -> str:
        return f"onnx:{self.domain}:{self.op_type}" if self.domain != DEFAULT_DOMAIN else f"onnx:{self.op_type}"


@dataclass(frozen=True)
class OnnxModel:
    path: str | None
    file_size: int
    ir_version: int
    producer: str
    opsets: dict[str, int]
    nodes: tuple[OnnxNode, ...]
    initializers: tuple[OnnxValue, ...]
    weight_bytes: int  # initializers and Constant nodes
    inputs: tuple[OnnxValue, ...]
    outputs: tuple[OnnxValue, ...]
    value_shapes: dict[str, tuple[Any, ...] | None] = field(default_factory=dict, compare=False)
    # Values of the small initializers (at most SMALL_CONSTANT elements): quantization
    # scales and zero points, shapes, axes.
    constants: dict[str, np.ndarray] = field(default_factory=dict, compare=False)
    # ONNX element type of each tensor whose type is known or inferred ("float", "int8", ...).
    value_types: dict[str, str] = field(default_factory=dict, compare=False)
    external_data: tuple[str, ...] = ()  # the files that hold external initializers, relative to the model

    @property
    def has_external_data(self) -> bool:
        return bool(self.external_data)


SMALL_CONSTANT = 4096


def _onnx():
    try:
        import onnx  # noqa: PLC0415 (lazy: optional dependency)
    except ImportError:
        raise BackendUnavailableError(
            "reading .onnx files needs the onnx package; install it with `pip install edgeinf[onnx]`",
            requested=("onnx",),
        ) from None
    return onnx


def _dtype_name(onnx, elem_type: int) -> str:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:  # noqa: BLE001 (types numpy lacks: bfloat16, float8, int4)
        pass
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:  # a type newer than the installed onnx, or garbage
        return f"UNKNOWN_{elem_type}"


def _text(value) -> str:
    """A protobuf string field (protobuf hands back bytes when the file's bytes are not UTF-8)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _value(onnx, vi) -> OnnxValue:
    t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if t is None:
        return OnnxValue(_text(vi.name), "non-tensor", None)
    shape = None
    if t.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (_text(d.dim_param) or -1) for d in t.shape.dim)
    return OnnxValue(_text(vi.name), _dtype_name(onnx, t.elem_type), shape)


def _attribute(onnx, a) -> Any:
    kind = a.type
    A = onnx.AttributeProto
    if kind == A.INT:
        return a.i
    if kind == A.FLOAT:
        return a.f
    if kind == A.STRING:
        return _text(a.s)
    if kind == A.INTS:
        return tuple(a.ints)
    if kind == A.FLOATS:
        return tuple(a.floats)
    if kind == A.TENSOR:
        return ("tensor", tuple(a.t.dims))
    if kind in (A.GRAPH, A.GRAPHS):
        return ("graph",)
    return (A.AttributeType.Name(kind),)


def _tensor_bytes(onnx, t) -> int:
    count = math.prod(t.dims)
    try:
        return count * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except Exception:  # noqa: BLE001 (types numpy lacks)
        return len(t.raw_data)


def _external_entry(t) -> dict[str, str]:
    return {_text(e.key): _text(e.value) for e in t.external_data}


def _check_external(where: str, tensor: str, entry: dict[str, str], size: int, base: Path | None) -> str:
    """The external file of one initializer, verified to exist beside the model and hold its bytes."""
    location = entry.get("location", "")
    if not location:
        raise ModelFileError(f"{where}: initializer {tensor!r} is stored externally but names no file")
    relative = Path(location)
    if relative.is_absolute() or ".." in relative.parts:
        raise ModelFileError(
            f"{where}: initializer {tensor!r} points outside the model's folder ({location!r}); "
            "external data must be a relative path beside the model"
        )
    if base is None:
        return location  # bytes without a file name: nothing to look in
    try:
        offset = int(entry.get("offset", "0") or 0)
        length = int(entry["length"]) if entry.get("length") else size
    except ValueError:
        raise ModelFileError(f"{where}: initializer {tensor!r} has a non-numeric external offset or length") from None
    file = base / relative
    if not file.is_file():
        raise ModelFileError(
            f"{where}: initializer {tensor!r} needs the external data file {location!r}, missing in {base}"
        )
    have = file.stat().st_size
    if offset < 0 or length < 0 or offset + length > have:
        raise ModelFileError(
            f"{where}: initializer {tensor!r} reads bytes {offset}..{offset + length} of {location!r}, "
            f"which has {have} bytes"
        )
    return location


def _type_name(onnx, elem_type: int) -> str | None:
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return None


def _value_types(onnx, model) -> dict[str, str]:
    """Element types of the graph's tensors: declared ones, and what onnx's type inference adds.

    Inference runs on a copy without the large weights' bytes (it needs their types and
    shapes; small constants such as Reshape targets stay, they refine inferred shapes).
    """
    graph = model.graph
    types: dict[str, str] = {}
    for t in graph.initializer:
        if (name := _type_name(onnx, t.data_type)) is not None:
            types[_text(t.name)] = name
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)
    for t in skeleton.graph.initializer:
        if math.prod(t.dims) <= SMALL_CONSTANT and t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        t.ClearField("raw_data")
        for field_name in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            t.ClearField(field_name)
        t.data_location = onnx.TensorProto.DEFAULT
        t.ClearField("external_data")
    with contextlib.suppress(Exception):  # inference failures: the declared types are still known
        graph = onnx.shape_inference.infer_shapes(skeleton).graph
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            name = _type_name(onnx, vi.type.tensor_type.elem_type)
            if name is not None:
                types.setdefault(_text(vi.name), name)
    return types


def read_onnx(path: Union[str, os.PathLike, bytes], name: Union[str, os.PathLike, None] = None) -> OnnxModel:
    """Parse an .onnx model (external weights are not loaded, only sized and found).

    Args:
        path: the file, or its bytes.
        name: the file the bytes were read from, for messages and to find external data
            beside it (a path names itself).

    Raises:
        BackendUnavailableError: the onnx package is not installed.
        ModelFileError: the file is missing, not an ONNX protobuf, or fails onnx's checker.
    """
    onnx = _onnx()
    from google.protobuf.message import DecodeError  # noqa: PLC0415 (ships with onnx)

    if isinstance(path, (bytes, bytearray, memoryview)):
        data = bytes(path)
        where = "model bytes" if name is None else Path(name).name
        base = None if name is None else Path(name).parent
        name = None if name is None else str(name)
    else:
        p = Path(path)
        data = read_model_file(p, "an .onnx file")
        name, where, base = str(p), p.name, p.parent
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ModelFileError(f"{where}: not a readable ONNX protobuf: {exc}") from None
    if not model.HasField("graph") or not model.opset_import:
        raise ModelFileError(f"{where}: not an ONNX model: it has no graph or no opset_import")
    external_files: dict[str, None] = {}
    for t in model.graph.initializer:  # before onnx's checker, whose message for a missing file is vaguer
        if t.data_location == onnx.TensorProto.EXTERNAL:
            entry = _external_entry(t)
            external_files[_check_external(where, _text(t.name), entry, _tensor_bytes(onnx, t), base)] = None
    checked = model
    if external_files:
        # onnx's checker finds external files relative to the model's own path, so it reads
        # the file: only when the file holds these very bytes (a model with external
        # weights is small).
        on_disk = Path(name) if name is not None else None
        try:
            same = on_disk is not None and on_disk.is_file() and on_disk.read_bytes() == data
        except OSError:
            same = False
        if not same:
            raise ModelFileError(f"{where}: has external data, which is only found from the model's own file")
        checked = str(on_disk)
    try:
        onnx.checker.check_model(checked)
    except (onnx.checker.ValidationError, ValueError) as exc:  # ValueError: e.g. a name that is not UTF-8
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        raise ModelFileError(f"{where}: fails onnx's model checker: {first}") from None

    opsets = {(_text(o.domain) or DEFAULT_DOMAIN): o.version for o in model.opset_import}
    nodes = []
    for i, n in enumerate(model.graph.node):
        domain = _text(n.domain) or DEFAULT_DOMAIN
        op_type = _text(n.op_type)
        since = None
        try:
            schema = onnx.defs.get_schema(op_type, opsets.get(domain, 1), "" if domain == DEFAULT_DOMAIN else domain)
            since = schema.since_version
        except Exception:  # noqa: BLE001 (SchemaError: unknown op or domain)
            since = None
        attrs = {_text(a.name): _attribute(onnx, a) for a in n.attribute}
        nodes.append(
            OnnxNode(
                index=i,
                name=_text(n.name) or f"{op_type}_{i}",
                domain=domain,
                op_type=op_type,
                since_version=since,
                inputs=tuple(_text(v) for v in n.input),
                outputs=tuple(_text(v) for v in n.output),
                attributes=attrs,
                has_subgraph=any(
                    a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute
                ),
            )
        )
    inits = []
    total = 0
    constants: dict[str, np.ndarray] = {}
    for t in model.graph.initializer:
        dtype = _dtype_name(onnx, t.data_type)
        shape = tuple(t.dims)
        if any(d < 0 for d in shape):
            raise ModelFileError(f"{where}: initializer {_text(t.name)!r} has a negative dimension: {list(shape)}")
        size = _tensor_bytes(onnx, t)
        external = t.data_location == onnx.TensorProto.EXTERNAL
        if not external and size > len(data):
            raise ModelFileError(
                f"{where}: initializer {_text(t.name)!r} of shape {list(shape)} claims {size} bytes, "
                f"the file has {len(data)}"
            )
        if not external and math.prod(shape) <= SMALL_CONSTANT:
            # Inconsistent data is the runtime's to report: here only a fact would be lost.
            with contextlib.suppress(Exception):
                constants[_text(t.name)] = onnx.numpy_helper.to_array(t)
        total += size
        inits.append(OnnxValue(_text(t.name), dtype, shape))
    for n in model.graph.node:  # weights exported as Constant nodes (PaddlePaddle does this)
        for a in n.attribute:
            if n.op_type == "Constant" and a.type == onnx.AttributeProto.TENSOR:
                total += _tensor_bytes(onnx, a.t)
                if (
                    n.output
                    and math.prod(a.t.dims) <= SMALL_CONSTANT
                    and a.t.data_location != onnx.TensorProto.EXTERNAL
                ):
                    with contextlib.suppress(Exception):
                        constants[_text(n.output[0])] = onnx.numpy_helper.to_array(a.t)
    init_names = {_text(t.name) for t in model.graph.initializer}
    value_shapes = {_text(vi.name): _value(onnx, vi).shape for vi in model.graph.value_info}
    value_types = _value_types(onnx, model)
    return OnnxModel(
        path=name,
        file_size=len(data),
        ir_version=model.ir_version,
        producer=f"{_text(model.producer_name)} {_text(model.producer_version)}".strip(),
        opsets=opsets,
        nodes=tuple(nodes),
        initializers=tuple(inits),
        weight_bytes=total,
        inputs=tuple(v for v in (_value(onnx, vi) for vi in model.graph.input) if v.name not in init_names),
        outputs=tuple(_value(onnx, vi) for vi in model.graph.output),
        value_shapes=value_shapes,
        value_types=value_types,
        constants=constants,
        external_data=tuple(external_files),
    )
