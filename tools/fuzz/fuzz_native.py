"""Coverage-guided fuzzing of edgeinf's public native entry points (atheris / libFuzzer).

Each input picks one entry point (int8 layers and ops, quantization helpers, top-k, SSD
decoding, NMS, anchors, the image pipeline, and the bindings under them) and builds its
arguments from the fuzz bytes: shapes (empty ones included), dtypes, strides (transposed,
sliced, read-only views), sizes and parameters up to 2**64. A documented edgeinf error
(`edgeinf.EdgeInfError`; `InputError` is one) is the expected answer to a bad call; any
other exception is a finding, and so is a crash (under ASan, any memory error).

    python tools/fuzz/fuzz_native.py scratch/ tools/fuzz/corpus/native -max_total_time=60
    python tools/fuzz/run.py --seconds 60 native

Arrays stay small (at most 4096 elements) so that every run is fast; the sizes that
matter for overflows come from parameters, not from allocations.
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings

import atheris

with atheris.instrument_imports(include=["edgeinf"]):
    import numpy as np

    import edgeinf
    from edgeinf import _C, postprocess, preprocess, quant
    from edgeinf.types import Layout

MAX_ELEMENTS = 4096
EXTREME_INTS = [0, 1, 2, 3, 4, 7, 8, 16, 255, 256, 4096, 65536, 2**20, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1]
EXTREME_FLOATS = [0.0, -0.0, 1e-45, 1e-38, 1.0 / 256, 0.1, 0.5, 1.0, 2.0, 128.0, 1e30, 3.4e38, math.inf, math.nan]
DTYPES = [np.int8, np.uint8, np.int32, np.float32, np.float64, np.int64, np.int16]

# The documented errors of the public calls. The image pipeline documents ValueError for
# its own Python checks (edgeinf.preprocess).
ALLOWED = (edgeinf.EdgeInfError,)
ALLOWED_PREPROCESS = (edgeinf.EdgeInfError, ValueError)
# The private bindings (_C) are called with raw Python ints: pybind11 refuses one that
# does not fit the C++ type with a TypeError before any C++ runs.
ALLOWED_BINDING = (edgeinf.EdgeInfError, TypeError)


class Inputs:
    """Typed values drawn from the fuzz bytes."""

    def __init__(self, data: bytes):
        self.fdp = atheris.FuzzedDataProvider(data)

    def pick(self, values):
        return self.fdp.PickValueInList(values)

    def flag(self) -> bool:
        return self.fdp.ConsumeBool()

    def small(self, lo: int = 0, hi: int = 8) -> int:
        return self.fdp.ConsumeIntInRange(lo, hi)

    def int(self, lo: int = -300, hi: int = 300) -> int:
        """An int near the usual range, or one of the extremes (either sign)."""
        if self.flag():
            return self.fdp.ConsumeIntInRange(lo, hi)
        value = self.pick(EXTREME_INTS)
        return -value if self.flag() else value

    def uint(self) -> int:
        return abs(self.int(0, 300))

    def real(self) -> float:
        if self.flag():
            return self.fdp.ConsumeFloatInRange(-4.0, 4.0)
        value = self.pick(EXTREME_FLOATS)
        return -value if self.flag() else value

    def scale(self) -> float:
        return abs(self.real()) if self.small(0, 3) else self.real()

    def shape(self, ndim: int | None = None, max_dim: int = 12) -> tuple[int, ...]:
        ndim = self.small(0, 5) if ndim is None else ndim
        shape = [self.small(0, max_dim) for _ in range(ndim)]
        while shape and math.prod(shape) > MAX_ELEMENTS:
            shape[shape.index(max(shape))] //= 2
        return tuple(shape)

    def array(self, dtype=None, shape=None) -> np.ndarray:
        """An array of fuzzed contents and layout: contiguous, transposed, strided or read-only."""
        dtype = np.dtype(self.pick(DTYPES) if dtype is None or self.small(0, 15) == 0 else dtype)
        shape = self.shape() if shape is None else tuple(shape)
        n = math.prod(shape)
        raw = self.fdp.ConsumeBytes(n * dtype.itemsize).ljust(n * dtype.itemsize, b"\0")
        arr = np.frombuffer(raw, dtype).reshape(shape).copy()
        layout = self.small(0, 5)
        if layout == 1 and arr.ndim >= 2:
            arr = np.ascontiguousarray(np.swapaxes(arr, 0, -1)).swapaxes(0, -1)
        elif layout == 2 and arr.ndim >= 1:
            arr = np.repeat(arr, 2, axis=-1)[..., ::2]
        elif layout == 3:
            arr.flags.writeable = False
        elif layout == 4 and arr.ndim >= 1:
            arr = np.broadcast_to(arr[..., :1], arr.shape) if arr.shape[-1] else arr
        return arr

    def maybe_out(self, shape, dtype) -> np.ndarray | None:
        if self.small(0, 3):
            return None
        return self.array(dtype, shape if self.flag() else self.shape())


def layer_params(inp: Inputs) -> dict:
    return dict(
        input_scale=inp.scale(),
        input_zero_point=inp.int(-130, 130),
        weight_scale=inp.scale() if inp.flag() else [inp.scale() for _ in range(inp.small(0, 6))],
        output_scale=inp.scale(),
        output_zero_point=inp.int(-130, 130),
        activation=inp.pick(["none", "relu", "relu6", "relu_n1_to_1", "gelu"]),
    )


def pair(inp: Inputs):
    return inp.uint() if inp.flag() else (inp.uint(), inp.uint())


def fully_connected(inp: Inputs):
    weights = inp.array(np.int8, inp.shape(2))
    bias = inp.array(np.int32, (weights.shape[0],) if weights.ndim else ()) if inp.flag() else None
    layer = quant.FullyConnected(weights, bias, **layer_params(inp))
    x = inp.array(np.int8, inp.shape()[:-1] + (weights.shape[1],) if inp.small(0, 3) else None)
    layer(x, inp.maybe_out(x.shape[:-1] + (weights.shape[0],), np.int8) if x.ndim else None)


def conv(inp: Inputs):
    depthwise = inp.flag()
    weights = inp.array(np.int8, (1,) + inp.shape(3, 5) if depthwise else inp.shape(4, 5))
    options = dict(stride=pair(inp), dilation=pair(inp), padding=inp.pick(["same", "valid", "full"]))
    if depthwise:
        layer = quant.DepthwiseConv2D(weights, depth_multiplier=inp.int(0, 4), **options, **layer_params(inp))
    else:
        layer = quant.Conv2D(weights, **options, **layer_params(inp))
    layer(inp.array(np.int8, inp.shape(4, 10)))


def pool(inp: Inputs):
    fn = quant.max_pool if inp.flag() else quant.average_pool
    activation = inp.pick(["none", "relu", "relu6"])
    fn(inp.array(np.int8, inp.shape(4, 10)), pair(inp), pair(inp) if inp.flag() else None,
       inp.pick(["same", "valid"]), activation, inp.scale() if inp.flag() else None,
       inp.int(-130, 130) if inp.flag() else None)  # fmt: skip


def elementwise(inp: Inputs):
    a = inp.array(np.int8)
    b = inp.array(np.int8, a.shape if inp.small(0, 3) else None)
    params = {k: inp.scale() if k.endswith("scale") else inp.int(-130, 130)
              for k in ("a_scale", "a_zero_point", "b_scale", "b_zero_point", "output_scale", "output_zero_point")}  # fmt: skip
    fn = quant.add if inp.flag() else quant.mul
    fn(a, b, **params, activation=inp.pick(["none", "relu"]), out=inp.maybe_out(a.shape, np.int8))


def activations(inp: Inputs):
    x = inp.array(np.int8)
    if inp.flag():
        quant.softmax(x, input_scale=inp.scale(), beta=inp.real(), out=inp.maybe_out(x.shape, np.int8))
    else:
        quant.logistic(x, input_scale=inp.scale(), input_zero_point=inp.int(-130, 130))


def conversions(inp: Inputs):
    which = inp.small(0, 5)
    if which == 0:
        x = inp.array(np.float32)
        count = inp.small(1, 4)
        quant.quantize(x, [inp.scale() for _ in range(count)], [inp.int(-130, 130) for _ in range(count)],
                       axis=inp.int(-6, 6) if inp.flag() else None)  # fmt: skip
    elif which == 1:
        count = inp.small(1, 4)
        quant.dequantize(inp.array(np.int8), [inp.scale() for _ in range(count)], [inp.int() for _ in range(count)],
                         axis=inp.int(-6, 6) if inp.flag() else None)  # fmt: skip
    elif which == 2:
        acc = inp.array(np.int32)
        count = inp.small(1, 5)
        quant.requantize(acc, [inp.int() for _ in range(count)], [inp.int(-40, 40) for _ in range(count)],
                         inp.int(-130, 130), inp.int(-130, 130), inp.int(-130, 130))  # fmt: skip
    elif which == 3:
        quant.multiply_by_quantized_multiplier(inp.array(np.int32), inp.int(), inp.int(-40, 40))
    elif which == 4:
        quant.quantize_multiplier(inp.real())
    else:
        quant.conv_output_size(inp.int(), inp.int(), inp.int(), inp.int(), inp.pick(["same", "valid"]))


def decoding(inp: Inputs):
    options = postprocess.DecodeOptions(
        num_coords=inp.uint() if inp.small(0, 3) == 0 else 16,
        num_keypoints=inp.int() if inp.small(0, 3) == 0 else 6,
        x_scale=inp.scale(), y_scale=inp.scale(), w_scale=inp.scale(), h_scale=inp.scale(),
        score_clip=inp.scale(), sigmoid=inp.flag(),
    )  # fmt: skip
    n = inp.small(0, 40)
    anchors = inp.array(np.float32, (n, 4) if inp.small(0, 5) else None)
    quantized = inp.flag()
    boxes = inp.array(np.int8 if quantized else np.float32, (n, 16) if inp.small(0, 3) else None)
    scores = inp.array(np.int8 if quantized else np.float32, (n,) if inp.small(0, 3) else None)
    q = (inp.scale(), inp.int(-130, 130))
    d = postprocess.decode_ssd(boxes, scores, anchors, options, score_threshold=inp.real(),
                               box_quantization=q if quantized else None,
                               score_quantization=q if quantized else None)  # fmt: skip
    postprocess.non_max_suppression(d, inp.real(), weighted=inp.flag(),
                                    max_detections=inp.int() if inp.flag() else None)  # fmt: skip


def suppression(inp: Inputs):
    n = inp.small(0, 30)
    d = postprocess.Detections(
        inp.array(np.float32, (n, 4) if inp.small(0, 5) else None),
        inp.array(np.float32, (n, inp.small(0, 6), 2) if inp.small(0, 5) else None),
        inp.array(np.float32, (n,) if inp.small(0, 5) else None),
        inp.array(np.int64, (n,) if inp.small(0, 5) else None),
    )
    postprocess.non_max_suppression(
        d, inp.real(), weighted=inp.flag(), max_detections=inp.int() if inp.flag() else None
    )


def ranking(inp: Inputs):
    which = inp.small(0, 3)
    if which == 0:
        postprocess.top_k(inp.array(np.int8 if inp.flag() else np.float32), inp.int())
    elif which == 1:
        postprocess.quantized_threshold(inp.real(), inp.scale(), inp.int(-130, 130), sigmoid=inp.flag())
    elif which == 2:
        size = (inp.small(1, 256), inp.small(1, 256))
        strides = tuple(inp.small(0, 64) if inp.flag() else inp.int() for _ in range(inp.small(0, 4)))
        postprocess.ssd_anchors(postprocess.AnchorOptions(input_size=size, strides=strides))
    else:
        decoder = postprocess.BlazeFaceDecoder(score_threshold=inp.real(), iou_threshold=inp.real())
        decoder(inp.array(np.float32, (1, 896, 16) if inp.flag() else None),
                inp.array(np.float32, (1, 896, 1) if inp.flag() else None))  # fmt: skip


COLORS = ["rgb", "bgr", "rgba", "bgra", "gray", "nv12", "nv21", "i420", "yuyv"]
FRAME_CHANNELS = {"rgb": 3, "bgr": 3, "rgba": 4, "bgra": 4, "gray": 1, "yuyv": 2}


def image(inp: Inputs):
    color = inp.pick(COLORS)
    width, height = inp.small(1, 40), inp.small(1, 40)
    if color in FRAME_CHANNELS:
        c = FRAME_CHANNELS[color]
        shape = (height, width) if c == 1 else (height, width, c)
    else:
        shape = (height * 3 // 2, width)
    frame = inp.array(np.uint8, shape if inp.small(0, 5) else None)
    pipe = preprocess.Pipeline(
        size=(inp.small(1, 24), inp.small(1, 24)),
        channels=inp.pick([1, 3]),
        layout=inp.pick([Layout.NHWC, Layout.NCHW]),
        dtype=inp.pick([np.float32, np.int8, np.uint8]),
        color=color,
        resize=inp.pick(["nearest", "bilinear", "area"]),
        letterbox=inp.flag(),
        scale=[inp.real() for _ in range(3)],
        bias=[inp.real() for _ in range(3)],
        threads=inp.pick([1, 2, 3, 8, 256, 257]),
    )
    out = pipe.new_output() if inp.small(0, 4) else inp.array(pipe.dtype)
    roi = None if inp.flag() else tuple(inp.int(-2, 48) for _ in range(4))
    pipe(frame, out, roi)


def bindings(inp: Inputs):
    """The private bindings straight, with the ints pybind11 lets through unchecked."""
    which = inp.small(0, 3)
    if which == 0:
        n = inp.small(0, 20)
        boxes, scores = inp.array(np.float32, (n, 16)), inp.array(np.float32, (n,))
        _C.DetectionDecoder(
            inp.array(np.float32, (n, 4)),
            inp.uint() if inp.flag() else 2**inp.small(0, 64), inp.uint() if inp.flag() else 2**inp.small(0, 64),
            128.0, 128.0, 128.0, 128.0, 100.0, True, 0.0, 128, 1.0, 0, 1.0, 0, 0.3, inp.small(0, 3), inp.uint(),
        )(boxes, scores)  # fmt: skip
    elif which == 1:
        fn = _C.quantize if inp.flag() else _C.dequantize
        x = inp.array(np.float32 if fn is _C.quantize else np.int8)
        count = inp.small(1, 3)
        fn(x, np.ones(count, np.float32), np.zeros(count, np.int32), inp.uint(), inp.uint())
    elif which == 2:
        src = (inp.int(-2, 64), inp.int(-2, 64))
        roi = tuple(inp.int(-2, 64) for _ in range(4))
        out = (inp.int(-2, 32), inp.int(-2, 32), inp.pick([1, 3, 4]))
        plan = _C.ImagePlan(inp.pick(COLORS), src, roi, out, inp.pick(["NHWC", "NCHW"]),
                            inp.pick(["float32", "int8", "uint8"]), inp.pick(["nearest", "bilinear", "area"]),
                            inp.flag(), inp.flag(), "limited", (1, 1, 1), (0, 0, 0), (0, 0, 0), -128.0, 127.0,
                            inp.int(0, 300))  # fmt: skip
        _C._run_plan(plan._capsule(), inp.array(np.uint8), inp.array(np.float32))
    else:
        _C.top_k(inp.array(np.int8), inp.uint())


TARGETS = [
    (fully_connected, ALLOWED),
    (conv, ALLOWED),
    (pool, ALLOWED),
    (elementwise, ALLOWED),
    (activations, ALLOWED),
    (conversions, ALLOWED),
    (decoding, ALLOWED),
    (suppression, ALLOWED),
    (ranking, ALLOWED),
    (image, ALLOWED_PREPROCESS),
    (bindings, ALLOWED_BINDING),
]


def test_one_input(data: bytes) -> None:
    inp = Inputs(data)
    target, allowed = TARGETS[inp.small(0, len(TARGETS) - 1)]
    with contextlib.suppress(allowed):
        target(inp)


def main() -> None:
    np.seterr(all="ignore")
    warnings.simplefilter("ignore")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
