"""Read an NCNN ``.param`` (text) file and check its ``.bin`` size, without importing ncnn.

The text format, as ``Net::load_param`` and ``ParamDict::load_param`` in ncnn parse it::

    7767517                                   magic
    <layer_count> <blob_count>
    <type> <name> <n_in> <n_out> <in blobs...> <out blobs...> <id=value ...>

A value is an int, a float (it contains ``.`` or ``e``), a string (starts with a letter
or ``"``), or an array: ``id=v1,v2,...`` or the old form ``-233xx=count,v1,...`` for
``id = -(-233xx) - 23300``. Ids are 0..31.

The ``.bin`` holds each weighted layer's arrays in layer order. An array loaded with
type 0 starts with a 4-byte tag that decides its size (fp16, int8, fp32 or a 256-entry
codebook); type 1 arrays are raw fp32. The expected size is computed by walking the
file with the same rules, for the layer types whose ``load_model`` is known here.

>>> p = read_ncnn_param("realesr-animevideov3-x2.param")   # doctest: +SKIP
>>> p.layers[2].type, p.layers[2].params[0]                 # doctest: +SKIP
('Convolution', 64)
"""

from __future__ import annotations

import logging
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from ..errors import ModelFileError

log = logging.getLogger(__name__)

MAGIC = 7767517
MAX_PARAM_ID = 31  # NCNN_MAX_PARAM_COUNT - 1
_ARRAY_BASE = -23300
_TOKEN = re.compile(r'\S*"[^"]*"\S*|\S+')
_TAG_FP16, _TAG_INT8, _TAG_FP32_SCALED = 0x01306B47, 0x000D4B38, 0x0002C056

# Layer types (lower case) whose load_model reads the .bin, from ncnn's src/layer/*.cpp
# (those defining ``load_model(const ModelBin&)``). A type not listed loads no weights.
WEIGHTED_LAYERS = frozenset(
    [
        "batchnorm",
        "bias",
        "convolution",
        "convolution1d",
        "convolution3d",
        "convolutiondepthwise",
        "convolutiondepthwise1d",
        "convolutiondepthwise3d",
        "deconvolution",
        "deconvolution1d",
        "deconvolution3d",
        "deconvolutiondepthwise",
        "deconvolutiondepthwise1d",
        "deconvolutiondepthwise3d",
        "deformableconv2d",
        "dequantize",
        "embed",
        "gemm",
        "groupnorm",
        "gru",
        "innerproduct",
        "instancenorm",
        "layernorm",
        "lstm",
        "memorydata",
        "multiheadattention",
        "normalize",
        "padding",
        "prelu",
        "quantize",
        "requantize",
        "rmsnorm",
        "rnn",
        "scale",
    ]
)

ParamValue = Union[int, float, str, tuple]


@dataclass(frozen=True)
class NcnnLayer:
    """One layer line.

    Attributes:
        params: param id -> int, float, str or tuple (arrays).
        line: 1-based line number in the .param file.
    """

    index: int
    type: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: dict[int, ParamValue]
    line: int

    def get(self, pid: int, default: ParamValue = 0) -> ParamValue:
        return self.params.get(pid, default)


@dataclass(frozen=True)
class NcnnParam:
    """A parsed .param file and what its .bin holds.

    Attributes:
        input_shapes: Input layer blob -> (c, h, w) from params 2, 1, 0 (0 = unknown).
        bin_size: bytes of the .bin, None if there is none.
        expected_bin_size: bytes the params imply, None when not computable.
        bin_note: why the .bin size was not (fully) checked, or a size remark.
    """

    path: str | None
    layer_count: int
    blob_count: int
    layers: tuple[NcnnLayer, ...]
    input_shapes: dict[str, tuple[int, ...]]
    bin_path: str | None
    bin_size: int | None
    expected_bin_size: int | None
    bin_note: str | None = None
    weight_bytes_by_layer: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def blobs(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for layer in self.layers:
            for b in layer.inputs + layer.outputs:
                seen.setdefault(b, None)
        return tuple(seen)

    @property
    def outputs(self) -> tuple[str, ...]:
        """Blobs produced and never consumed (the usual extraction targets)."""
        consumed = {b for layer in self.layers for b in layer.inputs}
        return tuple(b for layer in self.layers for b in layer.outputs if b not in consumed)


def _parse_scalar(token: str, where: str) -> int | float:
    is_float = "." in token or "e" in token.lower()
    try:
        return float(token) if is_float else int(token)
    except ValueError:
        raise ModelFileError(f"{where}: value {token!r} is neither an int nor a float") from None


def parse_params(tokens: list[str], where: str) -> dict[int, ParamValue]:
    """Parse ``id=value`` tokens with ncnn's rules (see the module docstring)."""
    params: dict[int, ParamValue] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise ModelFileError(f"{where}: expected id=value, got {token!r}")
        try:
            pid = int(key)
        except ValueError:
            raise ModelFileError(f"{where}: param id {key!r} is not an integer") from None
        old_array = pid <= _ARRAY_BASE
        if old_array:
            pid = -pid + _ARRAY_BASE
        if not 0 <= pid <= MAX_PARAM_ID:
            raise ModelFileError(f"{where}: param id {pid} out of range 0..{MAX_PARAM_ID}")
        if not value:
            raise ModelFileError(f"{where}: param {pid} has no value")
        if old_array:
            parts = value.split(",")
            try:
                count = int(parts[0])
            except ValueError:
                raise ModelFileError(f"{where}: array param {pid} count {parts[0]!r} is not an integer") from None
            items = parts[1:]
            if count != len(items):
                raise ModelFileError(f"{where}: array param {pid} declares {count} elements but has {len(items)}")
            params[pid] = tuple(_parse_scalar(v, where) for v in items)
        elif value[0].isalpha() or value[0] == '"':
            params[pid] = value.strip('"')
        elif "," in value:
            params[pid] = tuple(_parse_scalar(v, where) for v in value.split(",") if v)
        else:
            params[pid] = _parse_scalar(value, where)
    return params


def _lines(text: str):
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line:
            yield number, line


def read_ncnn_param(
    path: Union[str, os.PathLike],
    bin_path: Union[str, os.PathLike, None] = None,
    layer_names: dict[int, str] | None = None,
) -> NcnnParam:
    """Parse a .param file (text, or the binary .param.bin) and check its .bin.

    Args:
        path: the .param (text) or .param.bin (binary) file.
        bin_path: the weights; default: the same name with ``.bin`` (``x.param.bin`` -> ``x.bin``).
        layer_names: for binary files, layer type index -> name (the ncnn registry's order);
            without it a binary file's types read ``#<index>`` and the .bin is not sized.

    Raises:
        ModelFileError: bad magic, counts that disagree with the lines, a malformed
            layer line or param, a missing .bin the layers need, or a .bin shorter
            than the params imply (the message names expected and given sizes).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from None
    what = path.name
    if raw[:4] == BINARY_MAGIC:
        layers, layer_count, blob_count = _parse_binary(raw, what, layer_names or {})
        input_shapes = _input_shapes(layers)
        default_bin = (
            path.with_name(path.name[: -len(".param.bin")] + ".bin")
            if path.name.endswith(".param.bin")
            else path.with_suffix(".bin")
        )
        return _with_bin(
            path, what, layers, layer_count, blob_count, input_shapes, Path(bin_path) if bin_path else default_bin
        )
    if b"\0" in raw[:4096]:
        raise ModelFileError(
            f"{what}: binary data that is neither a text .param nor a binary .param.bin (magic {raw[:4]!r})"
        )
    text = raw.decode("utf-8", errors="replace")
    lines = _lines(text)
    number, first = next(lines, (0, ""))
    if first.split()[:1] != [str(MAGIC)]:
        raise ModelFileError(f"{what}: line {number}: magic is {first[:20]!r}, expected {MAGIC}")
    number, counts = next(lines, (0, ""))
    try:
        layer_count, blob_count = (int(v) for v in counts.split())
    except ValueError:
        raise ModelFileError(
            f"{what}: line {number}: expected '<layer_count> <blob_count>', got {counts[:40]!r}"
        ) from None
    if layer_count <= 0 or blob_count <= 0:
        raise ModelFileError(f"{what}: layer count {layer_count} and blob count {blob_count} must be positive")

    layers = []
    blob_names: set[str] = set()
    input_shapes = {}
    for number, line in lines:
        where = f"{what}: line {number}"
        tokens = _TOKEN.findall(line)
        if len(tokens) < 4:
            raise ModelFileError(f"{where}: expected '<type> <name> <n_in> <n_out> ...', got {line[:60]!r}")
        ltype, name = tokens[0], tokens[1]
        if len(ltype) > 255 or len(name) > 255:
            raise ModelFileError(f"{where}: layer type or name longer than 255 characters")
        try:
            n_in, n_out = int(tokens[2]), int(tokens[3])
        except ValueError:
            raise ModelFileError(f"{where}: blob counts {tokens[2]!r} {tokens[3]!r} are not integers") from None
        if n_in < 0 or n_out < 0 or 4 + n_in + n_out > len(tokens):
            raise ModelFileError(
                f"{where}: {ltype} {name} declares {n_in} inputs and {n_out} outputs, the line has {len(tokens) - 4} names"
            )
        inputs = tuple(tokens[4 : 4 + n_in])
        outputs = tuple(tokens[4 + n_in : 4 + n_in + n_out])
        params = parse_params(tokens[4 + n_in + n_out :], f"{where} ({ltype} {name})")
        if len(layers) >= layer_count:
            raise ModelFileError(
                f"{what}: the header declares {layer_count} layers but line {number} holds layer {len(layers) + 1}"
            )
        blob_names.update(inputs)
        blob_names.update(outputs)
        if len(blob_names) > blob_count:
            raise ModelFileError(f"{where}: {len(blob_names)} distinct blobs so far, the header declares {blob_count}")
        layer = NcnnLayer(len(layers), ltype, name, inputs, outputs, params, number)
        layers.append(layer)
        if ltype == "Input":
            for blob in outputs:
                shape = (layer.get(2, 0), layer.get(1, 0), layer.get(0, 0))
                d = layer.get(11, 0)
                input_shapes[blob] = ((d,) if d else ()) + shape
    if len(layers) != layer_count:
        raise ModelFileError(
            f"{what}: the header declares {layer_count} layers, the file has {len(layers)} (truncated?)"
        )

    bin_file = Path(bin_path) if bin_path is not None else path.with_suffix(".bin")
    return _with_bin(path, what, layers, layer_count, blob_count, input_shapes, bin_file)


def _input_shapes(layers) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for layer in layers:
        if layer.type == "Input":
            d = layer.get(11, 0)
            for blob in layer.outputs:
                shapes[blob] = ((d,) if d else ()) + (layer.get(2, 0), layer.get(1, 0), layer.get(0, 0))
    return shapes


def _with_bin(
    path: Path, what: str, layers, layer_count: int, blob_count: int, input_shapes, bin_file: Path
) -> NcnnParam:
    if any(layer.type.startswith("#") for layer in layers):
        size = bin_file.stat().st_size if bin_file.is_file() else None
        note = "layer types of this binary .param are indices: pass layer_names to size the .bin"
        return NcnnParam(
            str(path),
            layer_count,
            blob_count,
            tuple(layers),
            input_shapes,
            str(bin_file) if size is not None else None,
            size,
            None,
            note,
        )
    needs_weights = [layer for layer in layers if _loads_weights(layer)]
    if not bin_file.is_file():
        if needs_weights:
            first_weighted = needs_weights[0]
            raise ModelFileError(
                f"{what}: .param without its .bin: {len(needs_weights)} layers load weights "
                f"(first: {first_weighted.type} {first_weighted.name}) but {bin_file.name} does not exist"
            )
        return NcnnParam(str(path), layer_count, blob_count, tuple(layers), input_shapes, None, None, 0)
    size = bin_file.stat().st_size
    expected, note, per_layer = _walk_bin(bin_file, size, layers, what)
    if expected is not None and expected != size:
        note = f".bin is {size} bytes, {size - expected} more than the {expected} the params imply"
    return NcnnParam(
        str(path), layer_count, blob_count, tuple(layers), input_shapes, str(bin_file), size, expected, note, per_layer
    )


BINARY_MAGIC = struct.pack("<i", MAGIC)
_CUSTOM_BIT = 1 << 8
_EOP = -233


def _parse_binary(raw: bytes, what: str, names: dict[int, str]):
    """The binary .param.bin layout (Net::load_param_bin, ParamDict::load_param_bin): int32 magic,
    layer and blob counts; per layer: type index, bottom and top counts, blob indices; then
    params as (id, value) pairs until -233, arrays as id -233xx with a length, strings as
    -234xx with a length and padded bytes. Values are raw 4-byte words (int or float)."""
    n = len(raw)
    pos = 0

    def word(where: str) -> int:
        nonlocal pos
        if pos + 4 > n:
            raise ModelFileError(f"{what}: truncated at byte {n} while reading {where} (needs bytes {pos}..{pos + 4})")
        value = struct.unpack_from("<i", raw, pos)[0]
        pos += 4
        return value

    word("the magic")
    layer_count, blob_count = word("the layer count"), word("the blob count")
    if layer_count <= 0 or blob_count <= 0:
        raise ModelFileError(f"{what}: layer count {layer_count} and blob count {blob_count} must be positive")
    if layer_count > n // 12:
        raise ModelFileError(f"{what}: {layer_count} layers cannot fit in {n} bytes")
    layers = []
    for i in range(layer_count):
        where = f"layer {i}"
        typeindex, n_in, n_out = word(where), word(where), word(where)
        if n_in < 0 or n_out < 0 or pos + 4 * (n_in + n_out) > n:
            raise ModelFileError(f"{what}: {where} declares {n_in} inputs and {n_out} outputs, past the file's end")
        blobs = []
        for _ in range(n_in + n_out):
            b = word(where)
            if not 0 <= b < blob_count:
                raise ModelFileError(f"{what}: {where} blob index {b} out of range 0..{blob_count - 1}")
            blobs.append(str(b))
        params: dict[int, ParamValue] = {}
        pid = word(f"{where} params")
        while pid != _EOP:
            is_string, is_array = pid <= -23400, pid <= _ARRAY_BASE
            key = -pid - 23400 if is_string else (-pid + _ARRAY_BASE if is_array else pid)
            if not 0 <= key <= MAX_PARAM_ID:
                raise ModelFileError(f"{what}: {where} param id {key} out of range 0..{MAX_PARAM_ID}")
            if is_string:
                length = word(where)
                if not 0 <= length <= 255 or pos + (length + 3) // 4 * 4 > n:
                    raise ModelFileError(
                        f"{what}: {where} param {key} string of {length} bytes is invalid or truncated"
                    )
                params[key] = raw[pos : pos + length].split(b"\0")[0].decode("utf-8", "replace")
                pos += (length + 3) // 4 * 4
            elif is_array:
                length = word(where)
                if length < 0 or pos + 4 * length > n:
                    raise ModelFileError(
                        f"{what}: {where} array param {key} of {length} values runs past the file's end"
                    )
                params[key] = struct.unpack_from(f"<{length}i", raw, pos)
                pos += 4 * length
            else:
                params[key] = word(where)
            pid = word(f"{where} params")
        if typeindex & _CUSTOM_BIT:
            ltype = f"#custom{typeindex & ~_CUSTOM_BIT}"
        else:
            ltype = names.get(typeindex, f"#{typeindex}")
        layers.append(NcnnLayer(i, ltype, f"layer{i}", tuple(blobs[:n_in]), tuple(blobs[n_in:]), params, 0))
    return layers, layer_count, blob_count


class _Unsized(Exception):
    """A layer loads data in a way this reader does not size."""


class _BinWalker:
    """Follows ModelBinFromDataReader::load through the .bin to size each array."""

    def __init__(self, f, size: int, what: str):
        self.f, self.size, self.what, self.offset = f, size, what, 0

    def load(self, count: int, load_type: int, layer: NcnnLayer) -> None:
        if count < 0:
            raise ModelFileError(f"{self.what}: line {layer.line}: {layer.type} {layer.name} implies {count} weights")
        if load_type == 1:
            nbytes = 4 * count
        elif load_type != 0:
            raise _Unsized(f"load type {load_type}")
        else:
            self.need(4, layer)
            self.f.seek(self.offset)
            tag_bytes = self.f.read(4)
            tag = struct.unpack("<I", tag_bytes)[0]
            if tag == _TAG_FP16:
                nbytes = 4 + _align4(2 * count)
            elif tag == _TAG_INT8:
                nbytes = 4 + _align4(count)
            elif tag == _TAG_FP32_SCALED or sum(tag_bytes) == 0:
                nbytes = 4 + 4 * count
            else:  # a 256-entry float codebook followed by one byte index per weight
                nbytes = 4 + 1024 + _align4(count)
        self.need(nbytes, layer)
        self.offset += nbytes

    def need(self, nbytes: int, layer: NcnnLayer) -> None:
        if self.offset + nbytes > self.size:
            raise ModelFileError(
                f"{self.what}: .bin is {self.size} bytes, the params imply at least {self.offset + nbytes} "
                f"(layer {layer.type} {layer.name}, line {layer.line}, needs bytes {self.offset}..{self.offset + nbytes})"
            )


class _Counter:
    """A walker that only counts loads (to tell whether a layer reads the .bin at all)."""

    def __init__(self):
        self.loads = 0

    def load(self, count: int, load_type: int, layer: NcnnLayer) -> None:
        self.loads += 1


def _loads_weights(layer: NcnnLayer) -> bool:
    counter = _Counter()
    try:
        known = _load_layer(counter, layer)
    except _Unsized:
        return True
    return counter.loads > 0 if known else True


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _load_layer(w: _BinWalker, layer: NcnnLayer) -> bool:
    """Walk one layer's arrays; False if its load_model is not known here."""
    t, g = layer.type, layer.get
    if t in ("Convolution", "ConvolutionDepthWise", "Deconvolution", "DeconvolutionDepthWise"):
        dynamic = g(28, 0) if t.startswith("Deconvolution") else g(19, 0)
        if dynamic:
            return True
        num_output = g(0, 0)
        w.load(g(6, 0), 0, layer)
        if g(5, 0):
            w.load(num_output, 1, layer)
        int8 = g(8, 0) if t.startswith("Convolution") else 0
        if int8 and t == "Convolution":
            w.load(num_output, 1, layer)
            w.load(1, 1, layer)
        elif int8:
            w.load(g(7, 1) if int8 in (1, 101) else 1, 1, layer)
            w.load(1, 1, layer)
        if int8 > 100:
            w.load(1, 1, layer)
        return True
    if t == "InnerProduct":
        w.load(g(2, 0), 0, layer)
        if g(1, 0):
            w.load(g(0, 0), 1, layer)
        if g(8, 0):
            w.load(g(0, 0), 1, layer)
            w.load(1, 1, layer)
        return True
    if t == "PReLU":
        w.load(g(0, 0), 1, layer)
        return True
    if t == "BatchNorm":
        for _ in range(4):
            w.load(g(0, 0), 1, layer)
        return True
    if t == "Scale":
        if g(0, 0) != -233:
            w.load(g(0, 0), 1, layer)
            if g(1, 0):
                w.load(g(0, 0), 1, layer)
        return True
    if t == "Bias":
        w.load(g(0, 0), 1, layer)
        return True
    if t in ("InstanceNorm", "LayerNorm"):
        if g(2, 1):
            w.load(g(0, 0), 1, layer)
            w.load(g(0, 0), 1, layer)
        return True
    if t == "Embed":
        w.load(g(3, 0), 0, layer)
        if g(2, 0):
            w.load(g(0, 0), 1, layer)
        if g(18, 0):
            w.load(1, 1, layer)
        return True
    if t == "MemoryData":
        dims = [g(0, 0), g(1, 0), g(11, 0), g(2, 0)]
        count = 1
        for d in dims:
            count *= d if d else 1
        if any(dims):
            w.load(count, g(21, 1), layer)
        return True
    return layer.type.lower() not in WEIGHTED_LAYERS


def _walk_bin(bin_file: Path, size: int, layers, what: str):
    per_layer: dict[str, int] = {}
    with open(bin_file, "rb") as f:
        walker = _BinWalker(f, size, what)
        for layer in layers:
            before = walker.offset
            try:
                known = _load_layer(walker, layer)
            except _Unsized as exc:
                return (
                    None,
                    f".bin size checked up to byte {before} only: {layer.type} {layer.name} (line {layer.line}) "
                    f"uses {exc}, which this reader does not size",
                    per_layer,
                )
            if not known:
                return (
                    None,
                    (
                        f".bin size checked up to byte {before} only: {layer.type} {layer.name} (line {layer.line}) "
                        "loads weights whose size this reader does not compute"
                    ),
                    per_layer,
                )
            if walker.offset > before:
                per_layer[layer.name] = walker.offset - before
    return walker.offset, None, per_layer


def check_ncnn_weights(param: NcnnParam, bin_path: Union[str, os.PathLike]) -> None:
    """Check a .bin against a parsed .param (done by `read_ncnn_param` for the default .bin;
    this re-checks when the weights live elsewhere).

    Raises:
        ModelFileError: the .bin is missing while layers load weights, or shorter than the params imply.
    """
    bin_path = Path(bin_path)
    if param.bin_path is not None and Path(param.bin_path) == bin_path:
        return
    what = Path(param.path).name if param.path else "param"
    needs = [layer for layer in param.layers if _loads_weights(layer)]
    if not bin_path.is_file():
        if needs:
            raise ModelFileError(
                f"{what}: .param without its .bin: {len(needs)} layers load weights "
                f"(first: {needs[0].type} {needs[0].name}) but {bin_path.name} does not exist"
            )
        return
    _walk_bin(bin_path, bin_path.stat().st_size, param.layers, what)
