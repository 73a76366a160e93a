"""Camera frame to model input tensor in one fused native pass.

A :class:`Pipeline` is built once from a model's input :class:`~edgeinf.types.TensorSpec`
and then converts each frame (packed RGB/BGR/RGBA/BGRA/GRAY or camera YUV: NV12, NV21,
I420, YUYV) straight into an output array, typically the runtime's own input buffer:
crop, resize (nearest, bilinear or area), letterbox, colour conversion, per-channel
normalization and quantization happen in one pass in C++ with the GIL released.

>>> import numpy as np
>>> from edgeinf.types import Layout, TensorSpec
>>> spec = TensorSpec("input", (1, 128, 128, 3), np.dtype("float32"), Layout.NHWC)
>>> pipe = Pipeline.for_input(spec, color="bgr", mean=127.5, std=127.5)
>>> out = pipe.new_output()
>>> box = pipe(np.zeros((480, 640, 3), np.uint8), out)
>>> float(out[0, 0, 0, 0])
-1.0

See docs/preprocess.md for the exact arithmetic and its agreement with OpenCV.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _C
from ._C import _run_plan
from .errors import InputError
from .model import MAX_THREADS
from .types import Layout, TensorSpec

logger = logging.getLogger(__name__)

COLORS = ("rgb", "bgr", "rgba", "bgra", "gray", "nv12", "nv21", "i420", "yuyv")
RESIZES = ("nearest", "bilinear", "area")
_YUV420 = ("nv12", "nv21", "i420")
_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8"}
_QRANGE = {"int8": (-128.0, 127.0), "uint8": (0.0, 255.0), "float32": (0.0, 0.0)}
_PLAN_CACHE_SIZE = 8


@dataclass(frozen=True)
class Letterbox:
    """Where the source image landed in the output tensor, to map results back.

    An output pixel coordinate ``(u, v)`` (pixel edges, 0..width) comes from source
    coordinate ``(roi_x + (u - pad_x) / scale_x, roi_y + (v - pad_y) / scale_y)``.

    Attributes:
        scale_x, scale_y: output pixels per source pixel (equal when letterboxed).
        pad_x, pad_y: offset of the image content inside the output, in output pixels.
        content_w, content_h: size of the image content inside the output.
        roi_x, roi_y, roi_w, roi_h: the source rectangle that was converted.
        out_w, out_h: size of the output tensor's image.
    """

    scale_x: float
    scale_y: float
    pad_x: int
    pad_y: int
    content_w: int
    content_h: int
    roi_x: int
    roi_y: int
    roi_w: int
    roi_h: int
    out_w: int
    out_h: int

    def to_source(self, coords: np.ndarray | Sequence[float], normalized: bool = False) -> np.ndarray:
        """Map x, y pairs (``[..., 2k]``: points or ``x0, y0, x1, y1`` boxes) to the source image.

        Args:
            coords: output-tensor coordinates, x first; in pixels, or in [0, 1] of the
                output size when ``normalized``.
            normalized: whether ``coords`` are fractions of the output width and height.

        Returns:
            float64 array of the same shape in source pixels.

        >>> lb = Letterbox(0.5, 0.5, 0, 20, 100, 60, 0, 0, 200, 120, 100, 100)
        >>> lb.to_source([50, 50]).tolist()
        [100.0, 60.0]
        """
        c = np.array(coords, dtype=np.float64)
        if c.shape[-1] % 2:
            raise InputError(f"coordinates must come in x, y pairs; the last axis has {c.shape[-1]} values")
        x, y = c[..., 0::2], c[..., 1::2]
        if normalized:
            x, y = x * self.out_w, y * self.out_h
        c[..., 0::2] = self.roi_x + (x - self.pad_x) / self.scale_x
        c[..., 1::2] = self.roi_y + (y - self.pad_y) / self.scale_y
        return c


def _per_channel(value: float | Sequence[float] | None, default: float, name: str, channels: int) -> list[float]:
    if value is None:
        return [default] * 3
    vals = [float(v) for v in np.atleast_1d(np.asarray(value, dtype=np.float64))]
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 and not (channels == 1 and len(vals) == 1):
        raise InputError(f"{name} needs 1 or 3 values (one per output channel), got {len(vals)}")
    return vals


def frame_size(frame: np.ndarray, color: str) -> tuple[int, int]:
    """Width and height of the image in ``frame`` for colour format ``color``.

    4:2:0 frames (NV12, NV21, I420) are ``(height * 3 / 2, width)`` arrays, as OpenCV
    and most camera stacks hand them out; YUYV is ``(height, width, 2)``.

    Raises:
        InputError: if the array cannot hold an image of that format.
    """
    if not isinstance(frame, np.ndarray):
        raise InputError(f"frame must be a numpy array, got {type(frame).__name__}")
    if color not in COLORS:
        raise InputError(f"unknown colour format {color!r}: expected one of {', '.join(COLORS)}")
    if frame.dtype != np.uint8:
        raise InputError(f"frame must be uint8, got {frame.dtype}")
    if color in _YUV420:
        if frame.ndim != 2 or frame.shape[0] % 3:
            raise InputError(
                f"a {color} frame must be a (height * 3 / 2, width) array with a row count divisible by 3, "
                f"got shape {frame.shape}"
            )
        return frame.shape[1], frame.shape[0] * 2 // 3
    if frame.ndim not in (2, 3):
        raise InputError(f"a {color} frame must be a (height, width[, channels]) array, got shape {frame.shape}")
    return frame.shape[1], frame.shape[0]


def _roi_tuple(roi) -> tuple[int, int, int, int]:
    """``(x, y, width, height)`` as ints the native plan takes, or an `InputError`."""
    try:
        values = tuple(int(v) for v in roi)
    except (TypeError, ValueError):
        values = ()
    if len(values) != 4 or not all(-(2**62) < v < 2**62 for v in values):
        raise InputError(f"roi must be (x, y, width, height) in pixels, got {roi!r}")
    return values


class Pipeline:
    """Frame-to-tensor conversion for one output tensor; build with :meth:`for_input`.

    Calling the pipeline converts a frame into ``out`` and returns the
    :class:`Letterbox` parameters. A native plan is cached per frame shape and ROI, so
    a steady stream of frames costs one native call each.
    """

    def __init__(
        self,
        *,
        size: tuple[int, int],
        channels: int,
        layout: Layout,
        dtype: np.dtype,
        color: str = "bgr",
        resize: str = "bilinear",
        letterbox: bool = False,
        scale: Sequence[float] = (1.0, 1.0, 1.0),
        bias: Sequence[float] = (0.0, 0.0, 0.0),
        pad: Sequence[float] = (0.0, 0.0, 0.0),
        channel_order: str = "rgb",
        yuv_range: str = "limited",
        threads: int = 1,
    ) -> None:
        if color not in COLORS:
            raise InputError(f"unknown colour format {color!r}: expected one of {', '.join(COLORS)}")
        if resize not in RESIZES:
            raise InputError(f"unknown resize {resize!r}: expected one of {', '.join(RESIZES)}")
        if channel_order not in ("rgb", "bgr"):
            raise InputError(f"channel_order must be 'rgb' or 'bgr', got {channel_order!r}")
        if yuv_range not in ("limited", "full"):
            raise InputError(f"yuv_range must be 'limited' or 'full', got {yuv_range!r}")
        if channels not in (1, 3):
            raise InputError(f"the output needs 1 or 3 channels, got {channels}")
        if layout not in (Layout.NHWC, Layout.NCHW):
            raise InputError(f"layout must be NHWC or NCHW, got {layout}")
        dtype = np.dtype(dtype)
        if dtype not in _DTYPES:
            raise InputError(f"output dtype must be float32, int8 or uint8, got {dtype}")
        width, height = (int(v) for v in size)
        if width <= 0 or height <= 0:
            raise InputError(f"output size must be positive, got {width}x{height}")
        if not 1 <= int(threads) <= MAX_THREADS:
            raise InputError(f"threads must be from 1 to {MAX_THREADS}, got {threads}")
        self.width, self.height, self.channels = width, height, channels
        self.layout, self.dtype = Layout(layout), dtype
        self.color, self.resize, self.letterbox = color, resize, bool(letterbox)
        self.channel_order, self.yuv_range, self.threads = channel_order, yuv_range, int(threads)
        self._scale = tuple(float(v) for v in scale)
        self._bias = tuple(float(v) for v in bias)
        self._pad = tuple(float(v) for v in pad)
        # (shape, roi) -> (plan, letterbox, the plan's capsule for _C._run_plan; the plan
        # keeps the capsule's address alive)
        self._plans: OrderedDict[tuple, tuple[Any, Letterbox, Any]] = OrderedDict()
        # The per-frame path: frame shape -> the same entry, for whole frames, so that a call
        # costs one dict lookup and one native call. Its cold cost (caches flushed by other
        # work between camera frames) counts: see docs/preprocess.md.
        self._whole_frame: dict[tuple, tuple[Any, Letterbox, Any]] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_input(
        cls,
        spec: TensorSpec,
        color: str = "bgr",
        resize: str = "bilinear",
        letterbox: bool = False,
        mean: float | Sequence[float] | None = None,
        std: float | Sequence[float] | None = None,
        pad: float | Sequence[float] = 0.0,
        channel_order: str = "rgb",
        yuv_range: str = "limited",
        size: tuple[int, int] | None = None,
        threads: int = 1,
    ) -> Pipeline:
        """Build the pipeline that fills a model input described by ``spec``.

        The tensor receives ``(pixel - mean) / std`` per channel; an int8/uint8 input then
        gets ``round(that / scale) + zero_point`` with its quantization. Without ``mean``
        and ``std``, float inputs get raw pixel levels 0..255, uint8 inputs the pixel
        itself and int8 inputs ``pixel - 128`` (the TFLite convention for quantized
        image models).

        Args:
            spec: the model input (shape NHWC ``(1, H, W, C)`` or NCHW ``(1, C, H, W)``,
                C of 1 or 3, dtype float32, int8 or uint8).
            color: the frame's format: rgb, bgr, rgba, bgra, gray, nv12, nv21, i420, yuyv.
            resize: ``nearest``, ``bilinear`` (half-pixel centres) or ``area``.
            letterbox: keep the aspect ratio and pad the rest with ``pad``.
            mean, std: per-channel normalization in pixel levels (1 or 3 values, in the
                output's channel order).
            pad: letterbox colour in pixel levels (1 or 3 values).
            channel_order: ``rgb`` or ``bgr``: the order the model wants its channels in.
            yuv_range: BT.601 ``limited`` (video, Y in 16..235) or ``full`` (JPEG) range.
            size: ``(width, height)`` for inputs whose spatial size is dynamic (-1).
            threads: worker threads for large outputs (1: the calling thread only).

        Raises:
            InputError: for an input the pipeline cannot fill, or bad options.
        """
        shape = tuple(int(d) for d in spec.shape)
        while len(shape) > 3 and shape[0] == 1:
            shape = shape[1:]
        if len(shape) == 2:
            shape = (*shape, 1)
        if len(shape) != 3:
            raise InputError(f"input {spec.name!r} has shape {spec.shape}: expected (1, H, W, C) or (1, C, H, W)")
        layout = spec.layout
        if layout not in (Layout.NHWC, Layout.NCHW):
            layout = Layout.NHWC if shape[2] in (1, 3) else Layout.NCHW
        channels, height, width = (shape[2], shape[0], shape[1]) if layout == Layout.NHWC else shape
        if channels < 0:  # a fully dynamic input (NCNN's Input without sizes): an image has 3
            channels = 3
        if size is not None:
            width, height = (int(v) for v in size)
        if width < 0 or height < 0:
            raise InputError(f"input {spec.name!r} has a dynamic size {spec.shape}: pass size=(width, height)")
        dtype = np.dtype(spec.dtype)
        if dtype not in _DTYPES:
            raise InputError(f"input {spec.name!r} is {dtype}: image pipelines fill float32, int8 or uint8 inputs")
        scale, bias = _normalization(spec, dtype, mean, std, channels)
        return cls(
            size=(width, height),
            channels=channels,
            layout=layout,
            dtype=dtype,
            color=color,
            resize=resize,
            letterbox=letterbox,
            scale=scale,
            bias=bias,
            pad=_per_channel(pad, 0.0, "pad", channels),
            channel_order=channel_order,
            yuv_range=yuv_range,
            threads=threads,
        )

    @classmethod
    def for_model(
        cls, model: Any, frame: np.ndarray, color: str = "bgr", input_index: int = 0, **options: Any
    ) -> Pipeline:
        """The cached pipeline feeding ``model``'s input ``input_index`` from frames like ``frame``.

        Cached per (model, input spec, frame shape, options). Float inputs take ``mean`` and
        ``std`` from the options, else from the model's metadata, else raise `InputError`.

        Raises:
            InputError: an unknown option, a frame that is not an array, or a float input
                whose normalization nobody stated.
        """
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise InputError(f"unknown image option(s) {unknown}: expected color, roi or {', '.join(_OPTIONS)}")
        if not isinstance(frame, np.ndarray):
            raise InputError(f"frame must be a numpy array, got {type(frame).__name__}")
        spec = model.inputs[input_index]
        key = (input_index, spec, frame.shape, color, tuple(sorted((k, _freeze(v)) for k, v in options.items())))
        with _model_lock:
            try:
                per_model = _model_pipelines.setdefault(model, {})
            except TypeError:  # a model that cannot be weakly referenced: no cache
                per_model = {}
            pipe = per_model.get(key)
        if pipe is None:
            pipe = cls.for_input(spec, color=color, **_with_normalization(model, spec, input_index, options))
            with _model_lock:
                per_model[key] = pipe
        return pipe

    @property
    def output_shape(self) -> tuple[int, ...]:
        """``(1, H, W, C)`` or ``(1, C, H, W)``."""
        if self.layout == Layout.NHWC:
            return (1, self.height, self.width, self.channels)
        return (1, self.channels, self.height, self.width)

    def new_output(self) -> np.ndarray:
        """A fresh output array of the right shape and dtype."""
        return np.empty(self.output_shape, dtype=self.dtype)

    def plan(self, frame: np.ndarray, roi: Sequence[int] | None = None):
        """The cached native plan for this frame's shape and ROI."""
        return self._entry(frame, roi)[0]

    def _entry(self, frame: np.ndarray, roi: Sequence[int] | None) -> tuple[Any, Letterbox, Any]:
        roi_key = None if roi is None else _roi_tuple(roi)
        key: tuple[Any, Any] = (getattr(frame, "shape", None), roi_key)
        entry = self._plans.get(key)
        if entry is not None:
            return entry
        width, height = frame_size(frame, self.color)
        roi_t = (0, 0, width, height) if roi_key is None else roi_key
        qmin, qmax = _QRANGE[_DTYPES[self.dtype]]
        plan = _C.ImagePlan(
            format=self.color,
            src_size=(width, height),
            roi=roi_t,
            out_size=(self.width, self.height, self.channels),
            layout=self.layout.value,
            dtype=_DTYPES[self.dtype],
            resize=self.resize,
            letterbox=self.letterbox,
            bgr_out=self.channel_order == "bgr",
            yuv_range=self.yuv_range,
            scale=self._scale,
            bias=self._bias,
            pad=self._pad,
            qmin=qmin,
            qmax=qmax,
            threads=self.threads,
        )
        cx, cy, cw, ch = plan.content
        rx, ry, rw, rh = plan.roi
        letterbox = Letterbox(cw / rw, ch / rh, cx, cy, cw, ch, rx, ry, rw, rh, self.width, self.height)
        entry = (plan, letterbox, plan._capsule())
        with self._lock:
            self._plans[key] = entry
            if roi is None:
                self._whole_frame[key[0]] = entry
            while len(self._plans) > _PLAN_CACHE_SIZE:
                (shape, old_roi), _ = self._plans.popitem(last=False)
                if old_roi is None:
                    self._whole_frame.pop(shape, None)
        return entry

    def __call__(self, frame: np.ndarray, out: np.ndarray, roi: Sequence[int] | None = None) -> Letterbox:
        """Convert ``frame`` into ``out``.

        Args:
            frame: uint8 image in this pipeline's colour format.
            out: C-contiguous array of :attr:`output_shape` (batch dimension optional)
                and the pipeline's dtype, e.g. ``model.input_buffer()``.
            roi: ``(x, y, width, height)`` of the source rectangle to convert.

        Returns:
            The :class:`Letterbox` that maps output coordinates back to the frame.

        Raises:
            InputError: naming the problem, for a wrong dtype, shape, stride, ROI or size.
        """
        try:
            if roi is None and type(frame) is np.ndarray:
                fast = self._whole_frame.get(frame.shape)
                if fast is not None:
                    _, letterbox, capsule = fast
                    _run_plan(capsule, frame, out)
                    return letterbox
            _, letterbox, capsule = self._entry(frame, roi)
            _run_plan(capsule, frame, out)
        except InputError:
            raise
        except (ValueError, TypeError) as exc:  # the native checks: expected and given, in the message
            raise InputError(str(exc)) from None
        return letterbox


def _normalization(spec: TensorSpec, dtype: np.dtype, mean, std, channels: int) -> tuple[list[float], list[float]]:
    """Per-channel ``scale``, ``bias`` so that output = pixel * scale + bias (before rounding)."""
    quantized = dtype != np.float32
    if quantized and mean is None and std is None:
        offset = -128.0 if dtype == np.int8 else 0.0
        return [1.0] * 3, [offset] * 3
    m = _per_channel(mean, 0.0, "mean", channels)
    s = _per_channel(std, 1.0, "std", channels)
    if any(v == 0 for v in s):
        raise InputError(f"std must be non-zero, got {s}")
    q_scale, q_zero = 1.0, 0.0
    if quantized:
        q = spec.quantization
        if q is None:
            raise InputError(f"input {spec.name!r} is {dtype} without quantization parameters")
        if q.per_channel:
            raise InputError(f"input {spec.name!r} has per-channel quantization; images need one scale")
        q_scale, q_zero = float(q.scale), float(q.zero_point)
    scale = [1.0 / (sv * q_scale) for sv in s]
    bias = [q_zero - mv / (sv * q_scale) for mv, sv in zip(m, s)]
    return scale, bias


_model_pipelines: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_model_lock = threading.Lock()
_OPTIONS = ("resize", "letterbox", "mean", "std", "pad", "channel_order", "yuv_range", "size", "threads")


class ImageOutputs(dict):
    """A model's outputs by name, and the `Letterbox` of the frame that produced them."""

    letterbox: Letterbox | None = None

    @property
    def roi(self) -> tuple[int, int, int, int] | None:
        """``(x, y, width, height)``: the source rectangle that was converted."""
        lb = self.letterbox
        return None if lb is None else (lb.roi_x, lb.roi_y, lb.roi_w, lb.roi_h)


def stated_normalization(model: Any, input_index: int = 0):
    """The normalization the model's own metadata states for an input, or None.

    Read from the TFLite metadata (``NormalizationOptions``) of ``model.parsed``.
    """
    parsed = getattr(model, "parsed", None)
    if not getattr(parsed, "metadata", None):
        return None
    from .formats.tflite_metadata import input_normalization

    return input_normalization(parsed).get(input_index)


def _with_normalization(model: Any, spec: TensorSpec, input_index: int, options: dict) -> dict:
    """``options`` with ``mean``/``std`` from the model's metadata when the caller gave neither.

    A float input with no stated normalization needs it from the caller: feeding raw
    0..255 pixels to a model trained on [-1, 1] gives wrong answers without any error.
    """
    if options.get("mean") is not None or options.get("std") is not None:
        return options
    stated = stated_normalization(model, input_index)
    if stated is not None:
        return {**options, "mean": stated.mean, "std": stated.std}
    if np.dtype(spec.dtype) == np.float32:
        raise InputError(
            f"input {spec.name!r} is float32 and the model states no normalization: pass mean= and std= in pixel "
            "levels, e.g. mean=127.5, std=127.5 for [-1, 1], mean=0, std=255 for [0, 1], or mean=0, std=1 "
            "for raw 0..255 levels"
        )
    return options  # int8/uint8: the quantized image convention (see Pipeline.for_input)


def run_image(
    model: Any, frame: np.ndarray, color: str = "bgr", roi: Sequence[int] | None = None, **options: Any
) -> ImageOutputs:
    """``model.run_image(frame, color, roi, **options)``: see `edgeinf.Model.run_image`.

    >>> outputs = run_image(model, frame, color="bgr", mean=127.5, std=127.5)  # doctest: +SKIP
    >>> boxes = outputs.letterbox.to_source(raw_boxes)                          # doctest: +SKIP
    """
    return model.run_image(frame, color, roi, **options)


def _freeze(v: Any) -> Any:
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(np.asarray(v, dtype=np.float64).ravel().tolist())
    return v
