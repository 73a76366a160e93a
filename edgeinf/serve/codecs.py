"""Request bodies into model inputs, outputs into JSON.

A tensor travels as ``{"shape": [1, 128, 128, 3], "dtype": "float32", "data": ...}``: ``data``
is nested lists, or ``"b64"`` is the raw little-endian bytes in base64 (the compact form
for images and large tensors). A request holds one tensor, a list in input order, or a dict by
input name under ``"inputs"``. Images come as the body itself: ``image/jpeg``, ``image/png``,
or raw NV12 (``application/x-nv12`` with ``width`` and ``height``).

Everything a client sent is bounded before memory is allocated for it; a malformed body is a
`RequestError` (400), a well-formed one the model refuses is the model's `InputError` (422).
"""

from __future__ import annotations

import base64
import binascii
import functools
import io
import json
import math

import numpy as np

from ..errors import InputError

DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "bool")
MAX_DIMS = 8
IMAGE_TYPES = {"image/jpeg": "jpeg", "image/jpg": "jpeg", "image/png": "png"}
NV12_TYPES = ("application/x-nv12", "image/x-nv12")


class RequestError(InputError):
    """The request body itself is malformed (answered 400)."""


def decode_json_request(body: bytes, max_elements: int) -> tuple[object, dict]:
    """``(inputs, options)`` from a JSON request body.

    Returns:
        The inputs as `Model.run` takes them (an array, a list, or a dict by name), and the
        request's options: ``dequantize`` (bool) and ``encoding`` (``"list"`` or ``"b64"``).

    Raises:
        RequestError: not JSON, missing fields, an unknown dtype, a shape too large, data
            that does not fill the shape.
    """
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(request, dict) or "inputs" not in request:
        raise RequestError('expected a JSON object with "inputs": a tensor, a list of tensors, or {name: tensor}')
    unknown = sorted(set(request) - {"inputs", "dequantize", "encoding"})
    if unknown:
        raise RequestError(f"unknown request field(s) {unknown}; expected inputs, dequantize, encoding")
    encoding = request.get("encoding", "list")
    if encoding not in ("list", "b64"):
        raise RequestError(f'encoding must be "list" or "b64", got {encoding!r}')
    dequantize = request.get("dequantize", False)
    if not isinstance(dequantize, bool):
        raise RequestError(f"dequantize must be true or false, got {dequantize!r}")
    budget = [max_elements]
    raw = request["inputs"]
    inputs: dict[str, np.ndarray] | list[np.ndarray] | np.ndarray
    if isinstance(raw, dict) and "shape" not in raw:
        inputs = {str(name): decode_tensor(t, f"inputs.{name}", budget) for name, t in raw.items()}
    elif isinstance(raw, list):
        inputs = [decode_tensor(t, f"inputs[{i}]", budget) for i, t in enumerate(raw)]
    else:
        inputs = decode_tensor(raw, "inputs", budget)
    return inputs, {"dequantize": dequantize, "encoding": encoding}


def decode_tensor(tensor, where: str, budget: list) -> np.ndarray:
    """One ``{"shape", "dtype", "data" | "b64"}`` object as an array (C-contiguous)."""
    if not isinstance(tensor, dict):
        raise RequestError(f'{where}: expected {{"shape": [...], "dtype": "...", "data" or "b64": ...}}')
    unknown = sorted(set(tensor) - {"shape", "dtype", "data", "b64"})
    if unknown:
        raise RequestError(f"{where}: unknown field(s) {unknown}; expected shape, dtype, data or b64")
    shape = tensor.get("shape")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
    ):
        raise RequestError(f"{where}: shape must be a list of at most {MAX_DIMS} non-negative integers, got {shape!r}")
    dtype_name = tensor.get("dtype")
    if dtype_name not in DTYPES:
        raise RequestError(f"{where}: dtype must be one of {list(DTYPES)}, got {dtype_name!r}")
    dtype = np.dtype(dtype_name).newbyteorder("<")
    count = math.prod(shape)
    if count > budget[0]:
        raise RequestError(f"{where}: shape {shape} has {count} elements, more than this request may carry")
    budget[0] -= count
    has_data, has_b64 = "data" in tensor, "b64" in tensor
    if has_data == has_b64:
        raise RequestError(f'{where}: give exactly one of "data" (nested lists) or "b64" (base64 bytes)')
    if has_b64:
        text = tensor["b64"]
        if not isinstance(text, str):
            raise RequestError(f"{where}: b64 must be a base64 string")
        expected = count * dtype.itemsize
        if len(text) > 4 * (expected // 3 + 1) + 4:  # checked before decoding anything
            raise RequestError(f"{where}: b64 holds more than the {expected} bytes shape {shape} {dtype_name} needs")
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RequestError(f"{where}: b64 is not valid base64: {exc}") from None
        if len(raw) != expected:
            raise RequestError(f"{where}: b64 holds {len(raw)} bytes; shape {shape} {dtype_name} needs {expected}")
        return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)
    try:
        array = np.array(tensor["data"], dtype=dtype.newbyteorder("="))
    except (ValueError, TypeError, OverflowError) as exc:
        raise RequestError(f"{where}: data is not a {dtype_name} array: {exc}") from None
    if list(array.shape) != shape:
        raise RequestError(f"{where}: data has shape {list(array.shape)}, the tensor says {shape}")
    return np.ascontiguousarray(array)


def encode_outputs(outputs: dict, encoding: str) -> dict:
    """Outputs by name as JSON tensors (``data`` lists, or ``b64`` little-endian bytes)."""
    encoded = {}
    for name, value in outputs.items():
        array = np.asarray(value)
        tensor = {"shape": list(array.shape), "dtype": array.dtype.name}
        if encoding == "b64":
            little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
            tensor["b64"] = base64.b64encode(little.tobytes()).decode("ascii")
        else:
            tensor["data"] = array.tolist()
        encoded[str(name)] = tensor
    return encoded


def encode_answer(outputs: dict, encoding: str, extra: dict | None = None) -> bytes:
    """The JSON answer ``{"outputs": {name: tensor}, **extra}`` as bytes.

    Same document as ``json.dumps({"outputs": encode_outputs(outputs, encoding), **extra})``,
    but finite float32/float64 ``data`` is printed by %-format calls with the digits that
    round-trip the dtype exactly (9 and 17): `json.dumps` of ``tolist()`` spends microseconds
    per float on the shortest repr, tens of milliseconds for a detector's output.
    """
    parts = []
    for name, value in outputs.items():
        array = np.asarray(value)
        digits = _FLOAT_DIGITS.get(array.dtype.name)
        if encoding == "b64" or digits is None or not _plain_floats(array):
            text = json.dumps(encode_outputs({name: array}, encoding))[1:-1]  # '"name": {...}'
        else:
            head = json.dumps({"shape": list(array.shape), "dtype": array.dtype.name})[:-1]
            prefix, chunks = _nested_format(array.shape, digits)
            values = array.ravel().tolist()
            data = prefix + "".join(
                chunk % tuple(values[i * FORMAT_CHUNK : (i + 1) * FORMAT_CHUNK]) for i, chunk in enumerate(chunks)
            )
            text = f'{json.dumps(str(name))}: {head}, "data": {data}}}'
        parts.append(text)
    answer = '{"outputs": {' + ", ".join(parts) + "}"
    if extra:
        answer += ", " + json.dumps(extra)[1:-1]
    return (answer + "}").encode()


_FLOAT_DIGITS = {"float32": 9, "float64": 17}


def _plain_floats(array: np.ndarray) -> bool:
    """No NaN, infinity or -0.0: ``%g`` prints those unlike `json.dumps` (or as ints, -0)."""
    return bool(np.isfinite(array).all()) and not bool((np.signbit(array) & (array == 0)).any())


FORMAT_CHUNK = 1024  # values per format call: the GIL changes hands between calls


@functools.lru_cache(maxsize=32)
def _nested_format(shape: tuple, digits: int) -> tuple[str, list[str]]:
    """%-format strings that print an array of ``shape`` as nested JSON lists.

    The text before the first value, and pieces of `FORMAT_CHUNK` values each: one format
    call holds the GIL throughout, and on a busy server the model's worker and the event loop
    should not wait for a whole answer's formatting.
    """
    text = f"%.{digits}g"
    for size in reversed(shape):
        text = "[" + ", ".join([text] * size) + "]"
    prefix, *values = text.split("%")  # each of ``values`` is one specifier and the text after it
    chunks = ["%" + "%".join(values[i : i + FORMAT_CHUNK]) for i in range(0, len(values), FORMAT_CHUNK)]
    return prefix, chunks


def image_kind(content_type: str) -> str | None:
    """``"jpeg"``, ``"png"``, ``"nv12"`` or None (not an image request)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in NV12_TYPES:
        return "nv12"
    return IMAGE_TYPES.get(media)


def decode_image(body: bytes, kind: str, query, max_pixels: int) -> tuple[np.ndarray, str]:
    """``(frame, color)`` for `Model.run_image` from an image request.

    Raises:
        RequestError: a corrupt image, one above ``max_pixels``, or NV12 bytes that do not
            match ``width`` x ``height``.
    """
    if kind == "nv12":
        return _nv12(body, query, max_pixels), "nv12"
    return _compressed(body, kind, max_pixels), "rgb"


def _nv12(body: bytes, query, max_pixels: int) -> np.ndarray:
    try:
        width, height = int(query.get("width", "")), int(query.get("height", ""))
    except ValueError:
        raise RequestError("an NV12 body needs the query parameters width and height (integers)") from None
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise RequestError(f"NV12 needs an even, positive width and height, got {width}x{height}")
    if width * height > max_pixels:
        raise RequestError(f"a {width}x{height} image is larger than the {max_pixels} pixels allowed")
    expected = width * height * 3 // 2
    if len(body) != expected:
        raise RequestError(f"an NV12 {width}x{height} frame is {expected} bytes, the body has {len(body)}")
    return np.frombuffer(body, dtype=np.uint8).reshape(height * 3 // 2, width)


def _compressed(body: bytes, kind: str, max_pixels: int) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        return _compressed_cv2(body, kind, max_pixels)
    try:
        with Image.open(io.BytesIO(body)) as image:
            if image.format is None or image.format.lower() != kind:
                raise RequestError(f"the body is not a {kind.upper()} image (Pillow reads {image.format})")
            width, height = image.size  # read from the header: nothing is decoded yet
            if width * height > max_pixels:
                raise RequestError(f"a {width}x{height} image is larger than the {max_pixels} pixels allowed")
            return np.asarray(image.convert("RGB"))
    except RequestError:
        raise
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise RequestError(f"the body is not a readable {kind.upper()} image: {exc}") from None


def _compressed_cv2(body: bytes, kind: str, max_pixels: int) -> np.ndarray:
    try:
        import cv2
    except ImportError:
        raise RequestError("decoding JPEG or PNG needs Pillow or OpenCV: pip install pillow") from None
    import os

    os.environ.setdefault("OPENCV_IO_MAX_IMAGE_PIXELS", str(max_pixels))  # read when OpenCV decodes
    frame = cv2.imdecode(np.frombuffer(body, dtype=np.uint8), cv2.IMREAD_COLOR)
    if frame is None:
        raise RequestError(f"the body is not a readable {kind.upper()} image")
    if frame.shape[0] * frame.shape[1] > max_pixels:
        raise RequestError(f"a {frame.shape[1]}x{frame.shape[0]} image is larger than the {max_pixels} pixels allowed")
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
