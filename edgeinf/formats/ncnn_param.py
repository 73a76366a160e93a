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
codebook); type 1 arrays are raw fp32. The reader walks the .bin with the same rules,
layer by layer, and refuses a .bin whose size is not exactly what the params imply, or
a layer that loads weights it cannot size: ncnn itself does not notice extra bytes, and
weights read out of step corrupt its heap at run time.

>>> p = read_ncnn_param("realesr-animevideov3-x2.param")   # doctest: +SKIP
>>> p.layers[2].type, p.layers[2].params[0]                 # doctest: +SKIP
('Convolution', 64)
"""

from __future__ import annotations

import logging
import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from ..errors import ModelFileError
from ._files import read_model_file

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
        expected_bin_size: bytes the params imply (equal to ``bin_size``), None when not
            computable (a binary .param read without ``layer_names``).
        bin_note: why the .bin was not checked, if it was not.
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


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INT32 = (-(2**31), 2**31 - 1)


def _parse_scalar(token: str, where: str) -> int | float:
    """An int or a float as ncnn tells them apart (a ``.`` or an ``e`` makes a float), strictly:
    anything else (``1x``, ``1_0``, ``nan``) or an int outside int32 is refused."""
    is_float = "." in token or "e" in token.lower()
    if is_float and _FLOAT.fullmatch(token):
        return float(token)
    if not is_float and _INT.fullmatch(token):
        value = int(token)
        if not _INT32[0] <= value <= _INT32[1]:
            raise ModelFileError(f"{where}: value {token} is outside ncnn's int32 range")
        return value
    raise ModelFileError(f"{where}: value {token!r} is neither an int nor a float")


def parse_params(tokens: list[str], where: str) -> dict[int, ParamValue]:
    """Parse ``id=value`` tokens with ncnn's rules (see the module docstring)."""
    params: dict[int, ParamValue] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise ModelFileError(f"{where}: expected id=value, got {token!r}")
        if not _INT.fullmatch(key):
            raise ModelFileError(f"{where}: param id {key!r} is not an integer")
        pid = int(key)
        old_array = pid <= _ARRAY_BASE
        if old_array:
            pid = -pid + _ARRAY_BASE
        if not 0 <= pid <= MAX_PARAM_ID:
            raise ModelFileError(f"{where}: param id {pid} out of range 0..{MAX_PARAM_ID}")
        if not value:
            raise ModelFileError(f"{where}: param {pid} has no value")
        if old_array:
            parts = value.split(",")
            if not _INT.fullmatch(parts[0]):
                raise ModelFileError(f"{where}: array param {pid} count {parts[0]!r} is not an integer")
            count = int(parts[0])
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
            layer line or param (a non-number where a number is expected, an absurd
            size), a missing .bin the layers need, a .bin whose size is not exactly
            what the params imply (the message names both sizes and the layer where
            reading went astray), or a layer whose weights edgeinf cannot size.
    """
    path = Path(path)
    raw = read_model_file(path, "an NCNN .param file")
    what = path.name
    if raw[:4] == BINARY_MAGIC:
        layers, layer_count, blob_count = _parse_binary(raw, what, layer_names or {})
        input_shapes = _input_shapes(layers, what)
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
    if len(layers) != layer_count:
        raise ModelFileError(
            f"{what}: the header declares {layer_count} layers, the file has {len(layers)} (truncated?)"
        )

    bin_file = Path(bin_path) if bin_path is not None else path.with_suffix(".bin")
    return _with_bin(path, what, layers, layer_count, blob_count, _input_shapes(layers, what), bin_file)


def _input_shapes(layers, what: str) -> dict[str, tuple[int, ...]]:
    """Input blob -> ([d,] c, h, w) from params 11, 2, 1, 0; 0 = set by the first input."""
    shapes = {}
    for layer in layers:
        if layer.type == "Input":
            get = _LayerParams(layer, what).int
            w, h, c, d = get(0, 0), get(1, 0), get(2, 0), get(11, 0)
            shape = ((d,) if d else ()) + (c, h, w)
            if any(v < 0 for v in shape) or math.prod(v or 1 for v in shape) > MAX_ELEMENTS:
                raise ModelFileError(
                    f"{what}: line {layer.line}: Input {layer.name} has shape {list(shape)}: every dimension "
                    f"must be 0 (any) or positive, {MAX_ELEMENTS} elements at most"
                )
            for blob in layer.outputs:
                shapes[blob] = shape
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
    needs_weights = [layer for layer in layers if _loads_weights(layer, what)]
    if not bin_file.is_file():
        if needs_weights:
            first_weighted = needs_weights[0]
            raise ModelFileError(
                f"{what}: .param without its .bin: {len(needs_weights)} layers load weights "
                f"(first: {first_weighted.type} {first_weighted.name}) but {bin_file.name} does not exist"
            )
        return NcnnParam(str(path), layer_count, blob_count, tuple(layers), input_shapes, None, None, 0)
    size = bin_file.stat().st_size
    expected, per_layer = _walk_bin(bin_file, size, layers, what)
    return NcnnParam(
        str(path), layer_count, blob_count, tuple(layers), input_shapes, str(bin_file), size, expected, None, per_layer
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


MAX_ELEMENTS = 2**31 - 1  # ncnn sizes arrays with int: a larger count overflows inside ncnn
_STORAGE_TAGS = "fp32 (0), fp16 (0x01306B47), int8 (0x000D4B38) or scaled fp32 (0x0002C056)"


class _LayerParams:
    """A layer's params read with the types its ``load_param`` reads them as."""

    def __init__(self, layer: NcnnLayer, what: str):
        self.layer, self.what = layer, what

    def int(self, pid: int, default: int) -> int:
        value = self.layer.params.get(pid, default)
        if not isinstance(value, int):
            raise ModelFileError(
                f"{self.what}: line {self.layer.line}: {self.layer.type} {self.layer.name}: "
                f"param {pid} must be an integer, got {value!r}"
            )
        return value


class _BinWalker:
    """Follows ModelBinFromDataReader::load through the .bin to size each array.

    Also remembers the first array whose 4-byte tag is none of ncnn's storage tags (ncnn
    then reads a 256-entry codebook): in a model written by a current converter that is
    where reading went astray when params and weights disagree.
    """

    def __init__(self, f, size: int, what: str, bin_name: str):
        self.f, self.size, self.what, self.bin_name, self.offset = f, size, what, bin_name, 0
        self.odd_tag: tuple[NcnnLayer, int, int] | None = None  # (layer, byte offset, tag)
        self.last: NcnnLayer | None = None

    def load(self, layer: NcnnLayer, load_type: int, *dims: int) -> None:
        count = 1
        for d in dims:
            if d <= 0:
                raise ModelFileError(
                    f"{self.what}: line {layer.line}: {layer.type} {layer.name} loads an array of shape "
                    f"{list(dims)} from the .bin, every dimension must be positive"
                )
            count *= d
        if count > MAX_ELEMENTS:
            raise ModelFileError(
                f"{self.what}: line {layer.line}: {layer.type} {layer.name} implies {count} weights in one array, "
                f"more than ncnn can index ({MAX_ELEMENTS})"
            )
        self.last = layer
        if load_type == 1:
            nbytes = 4 * count
        elif load_type != 0:
            raise ModelFileError(
                f"{self.what}: line {layer.line}: {layer.type} {layer.name} asks for load type {load_type}, "
                "ncnn knows 0 (tagged) and 1 (raw fp32)"
            )
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
                if self.odd_tag is None:
                    self.odd_tag = (layer, self.offset, tag)
        self.need(nbytes, layer)
        self.offset += nbytes

    def need(self, nbytes: int, layer: NcnnLayer) -> None:
        if self.offset + nbytes > self.size:
            raise ModelFileError(
                f"{self.what}: {self.bin_name} is {self.size} bytes, the params imply at least {self.offset + nbytes} "
                f"(layer {layer.type} {layer.name}, line {layer.line}, needs bytes {self.offset}..{self.offset + nbytes})"
            )

    def divergence(self) -> str:
        if self.odd_tag is not None:
            layer, at, tag = self.odd_tag
            return (
                f"reading went astray at or before {layer.type} {layer.name} (line {layer.line}): its weights at byte "
                f"{at} start with tag 0x{tag:08X}, not {_STORAGE_TAGS}"
            )
        if self.last is not None:
            return f"the last layer read was {self.last.type} {self.last.name} (line {self.last.line})"
        return "no layer reads weights"


class _Counter:
    """A walker that only counts loads (to tell whether a layer reads the .bin at all)."""

    def __init__(self):
        self.loads = 0

    def load(self, layer: NcnnLayer, load_type: int, *dims: int) -> None:
        self.loads += 1


def _loads_weights(layer: NcnnLayer, what: str) -> bool:
    counter = _Counter()
    _load_layer(counter, layer, what)
    return counter.loads > 0


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _load_layer(w, layer: NcnnLayer, what: str) -> None:
    """Walk one layer's arrays the way its ``load_model`` reads them (ncnn's src/layer/*.cpp).

    Raises:
        ModelFileError: the layer loads weights whose size this reader does not know, or a
            param it sizes with is not an integer.
    """
    t = layer.type
    p = _LayerParams(layer, what)
    g = p.int
    if t in _CONVOLUTIONS:
        dynamic_id = 28 if t.startswith("Deconvolution") else 19
        if dynamic_id in _CONVOLUTIONS[t] and g(dynamic_id, 0):
            return
        num_output = g(0, 0)
        w.load(layer, 0, g(6, 0))
        if g(5, 0):
            w.load(layer, 1, num_output)
        if 8 not in _CONVOLUTIONS[t]:
            return
        int8 = g(8, 0)
        if t == "Convolution":
            if int8:
                w.load(layer, 1, num_output)
                w.load(layer, 1, 1)
        elif int8 in (1, 101):  # ConvolutionDepthWise: per-group or one weight scale
            w.load(layer, 1, g(7, 1))
            w.load(layer, 1, 1)
        elif int8 in (2, 102):
            w.load(layer, 1, 1)
            w.load(layer, 1, 1)
        if int8 > 100:
            w.load(layer, 1, 1)
    elif t == "InnerProduct":
        w.load(layer, 0, g(2, 0))
        if g(1, 0):
            w.load(layer, 1, g(0, 0))
        if g(8, 0):
            w.load(layer, 1, g(0, 0))
            w.load(layer, 1, 1)
    elif t in ("PReLU", "Bias"):
        w.load(layer, 1, g(0, 0))
    elif t == "BatchNorm":
        for _ in range(4):  # slope, mean, variance, bias
            w.load(layer, 1, g(0, 0))
    elif t == "Scale":
        if g(0, 0) != -233:  # -233: the scale is a second input blob
            w.load(layer, 1, g(0, 0))
            if g(1, 0):
                w.load(layer, 1, g(0, 0))
    elif t in ("InstanceNorm", "LayerNorm"):
        if g(2, 1):
            w.load(layer, 1, g(0, 0))
            w.load(layer, 1, g(0, 0))
    elif t == "GroupNorm":
        if g(3, 1):
            w.load(layer, 1, g(1, 0))
            w.load(layer, 1, g(1, 0))
    elif t == "RMSNorm":
        if g(2, 1):
            w.load(layer, 1, g(0, 0))
    elif t in ("Normalize", "Quantize"):
        w.load(layer, 1, g(3, 0) if t == "Normalize" else g(0, 1))
    elif t == "Dequantize":
        w.load(layer, 1, g(0, 1))
        if g(1, 0):
            w.load(layer, 1, g(1, 0))
    elif t == "Requantize":
        w.load(layer, 1, g(0, 1))
        w.load(layer, 1, g(1, 1))
        if g(2, 0):
            w.load(layer, 1, g(2, 0))
    elif t == "Padding":
        if g(6, 0):
            w.load(layer, 1, g(6, 0))
    elif t == "Embed":
        w.load(layer, 0, g(3, 0))
        if g(2, 0):
            w.load(layer, 1, g(0, 0))
        if g(18, 0):
            w.load(layer, 1, 1)
    elif t == "MemoryData":
        width, h, d, c = g(0, 0), g(1, 0), g(11, 0), g(2, 0)
        dims = (width, h, d, c) if d else (width, h, c) if c else (width, h) if h else (width,) if width else ()
        if dims:
            w.load(layer, g(21, 1), *dims)
    elif t in ("RNN", "LSTM", "GRU"):
        _load_recurrent(w, layer, g, what)
    elif t == "Gemm":
        _load_gemm(w, layer, g, what)
    elif t == "MultiHeadAttention":
        _load_attention(w, layer, g, what)
    elif t.lower() in WEIGHTED_LAYERS:
        raise ModelFileError(
            f"{what}: line {layer.line}: {t} {layer.name} loads weights whose size edgeinf does not compute, "
            "so the .bin cannot be verified"
        )


# Convolution-like layers: the params each one's load_param reads beyond 0, 5, 6
# (19/28 = dynamic weight, 7 = group, 8 = int8 scale term).
_CONVOLUTIONS = {
    "Convolution": (8, 19),
    "ConvolutionDepthWise": (7, 8, 19),
    "Convolution1D": (19,),
    "ConvolutionDepthWise1D": (7, 19),
    "Convolution3D": (),
    "ConvolutionDepthWise3D": (7,),
    "Deconvolution": (28,),
    "DeconvolutionDepthWise": (7, 28),
    "Deconvolution1D": (28,),
    "DeconvolutionDepthWise1D": (7, 28),
    "Deconvolution3D": (),
    "DeconvolutionDepthWise3D": (7,),
    "DeformableConv2D": (),
}


def _require_positive(layer: NcnnLayer, what: str, **sizes: int) -> None:
    for name, value in sizes.items():
        if value <= 0:
            raise ModelFileError(
                f"{what}: line {layer.line}: {layer.type} {layer.name}: {name} is {value}, expected a positive size"
            )


def _load_recurrent(w, layer: NcnnLayer, g, what: str) -> None:
    t = layer.type
    num_output, weight_size, directions = g(0, 0), g(1, 0), 2 if g(2, 0) == 2 else 1
    hidden = g(3, num_output) if t == "LSTM" else num_output
    gates = {"RNN": 1, "LSTM": 4, "GRU": 3}[t]
    _require_positive(layer, what, num_output=num_output, hidden_size=hidden)
    size = int(weight_size / directions / hidden / gates)  # ncnn divides ints left to right
    w.load(layer, 0, size, hidden * gates, directions)
    w.load(layer, 0, hidden, {"RNN": 1, "LSTM": 4, "GRU": 4}[t], directions)
    w.load(layer, 0, num_output, hidden * gates, directions)
    if t == "LSTM" and num_output != hidden:
        w.load(layer, 0, hidden, num_output, directions)
    if g(8, 0):
        w.load(layer, 1, hidden * gates, directions)
        w.load(layer, 1, hidden * gates, directions)


def _block_quantized(quantize_term: int) -> bool:
    return quantize_term // 100 in (4, 6, 8) and quantize_term % 100 // 10 in (0, 1) and quantize_term % 10 <= 2


def _load_gemm(w, layer: NcnnLayer, g, what: str) -> None:
    trans_a, trans_b = g(2, 0), g(3, 0)
    const_a, const_b, const_c = g(4, 0), g(5, 0), g(6, 0)
    m, n, k, broadcast_c, quantize = g(7, 0), g(8, 0), g(9, 0), g(10, 0), g(18, 0)
    if _block_quantized(quantize):
        raise ModelFileError(
            f"{what}: line {layer.line}: Gemm {layer.name} holds block-quantized weights (18={quantize}), "
            "whose size edgeinf does not compute, so the .bin cannot be verified"
        )
    if const_a == 1:
        w.load(layer, 0, *((k, m) if trans_a == 0 else (m, k)))
    if const_b == 1:
        w.load(layer, 0, *((n, k) if trans_b == 0 else (k, n)))
    if const_c == 1 and broadcast_c != -1:
        c_shape = {0: (1,), 1: (m,), 2: (1, m), 3: (n, m), 4: (n, 1)}.get(broadcast_c)
        if c_shape is None:
            raise ModelFileError(
                f"{what}: line {layer.line}: Gemm {layer.name}: constant C broadcast type {broadcast_c} "
                "is none of -1..4"
            )
        w.load(layer, 0, *c_shape)
    if quantize:
        if const_a == 1:
            w.load(layer, 1, m)
        if const_b == 1:
            w.load(layer, 1, 1)


def _load_attention(w, layer: NcnnLayer, g, what: str) -> None:
    embed, weight_size, quantize = g(0, 0), g(2, 0), g(18, 0)
    kdim, vdim = g(3, embed), g(4, embed)
    if _block_quantized(quantize):
        raise ModelFileError(
            f"{what}: line {layer.line}: MultiHeadAttention {layer.name} holds block-quantized weights "
            f"(18={quantize}), whose size edgeinf does not compute, so the .bin cannot be verified"
        )
    _require_positive(layer, what, embed_dim=embed)
    qdim = int(weight_size / embed)
    for dim in (qdim, kdim, vdim):
        w.load(layer, 0, embed, dim)
        w.load(layer, 1, embed)
    w.load(layer, 0, qdim, embed)
    w.load(layer, 1, qdim)
    if quantize:
        for _ in range(3):
            w.load(layer, 1, embed)
        w.load(layer, 1, 1)


def _walk_bin(bin_file: Path, size: int, layers, what: str) -> tuple[int, dict[str, int]]:
    """The .bin's size as the params imply it, and the bytes each layer reads.

    Raises:
        ModelFileError: the .bin is shorter or longer than the params imply, or a layer
            loads weights this reader cannot size.
    """
    per_layer: dict[str, int] = {}
    with open(bin_file, "rb") as f:
        walker = _BinWalker(f, size, what, bin_file.name)
        for layer in layers:
            before = walker.offset
            _load_layer(walker, layer, what)
            if walker.offset > before:
                per_layer[layer.name] = walker.offset - before
    if walker.offset != size:
        raise ModelFileError(
            f"{what}: {bin_file.name} is {size} bytes but the params imply {walker.offset} "
            f"({size - walker.offset} bytes left over); {walker.divergence()}. "
            "The .param and .bin do not belong together, or one of them was edited"
        )
    return walker.offset, per_layer


def check_ncnn_weights(param: NcnnParam, bin_path: Union[str, os.PathLike]) -> None:
    """Check a .bin against a parsed .param (done by `read_ncnn_param` for the default .bin;
    this re-checks when the weights live elsewhere).

    Raises:
        ModelFileError: the .bin is missing while layers load weights, or its size is not
            exactly what the params imply.
    """
    bin_path = Path(bin_path)
    if param.bin_path is not None and Path(param.bin_path) == bin_path:
        return
    what = Path(param.path).name if param.path else "param"
    needs = [layer for layer in param.layers if _loads_weights(layer, what)]
    if not bin_path.is_file():
        if needs:
            raise ModelFileError(
                f"{what}: .param without its .bin: {len(needs)} layers load weights "
                f"(first: {needs[0].type} {needs[0].name}) but {bin_path.name} does not exist"
            )
        return
    _walk_bin(bin_path, bin_path.stat().st_size, param.layers, what)
