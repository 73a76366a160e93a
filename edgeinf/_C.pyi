"""Types of the native module `edgeinf._C` (private: use edgeinf.isa, edgeinf.preprocess,
edgeinf.quant, edgeinf.postprocess and edgeinf.engine).

First drafted with pybind11-stubgen from the built module, then checked against
csrc/bindings/*.cc; tests/kernels/test_native_stub.py holds the names to the module's.
"""

from collections.abc import Sequence
from typing import Any, SupportsFloat, SupportsIndex, SupportsInt, TypeAlias

import numpy as np
from numpy.typing import NDArray

_Int: TypeAlias = SupportsInt | SupportsIndex
_Float: TypeAlias = SupportsFloat | SupportsIndex
_Array: TypeAlias = NDArray[Any]

__all__: list[str] = [
    "DetectionDecoder",
    "EngineProgram",
    "ImagePlan",
    "Qs8Conv2d",
    "Qs8DepthwiseConv2d",
    "Qs8FullyConnected",
    "activation_range",
    "active_isa",
    "add",
    "best_isa",
    "built_isas",
    "cpu_features",
    "dequantize",
    "emulated_isas",
    "logistic",
    "mul",
    "multiply_by_quantized_multiplier",
    "non_max_suppression",
    "pool",
    "pool_threads",
    "quantize",
    "quantize_multiplier",
    "requantize",
    "set_isa",
    "softmax",
    "softmax_params",
    "supported_isas",
    "top_k",
    "warp_affine",
]

_Requantization: TypeAlias = tuple[_Array, _Array, _Int, _Int, _Int]
"""(multiplier, shift, output_zero_point, act_min, act_max): int32 multipliers and shifts,
one per output channel or one for all."""
_DoubleRequantization: TypeAlias = tuple[_Array, _Int, _Int, _Int]
"""(scale, output_zero_point, act_min, act_max): float64 factors input_scale * weight_scale /
output_scale, one per output channel or one for all (TFLite's reference FULLY_CONNECTED)."""
_Spatial: TypeAlias = tuple[_Int, _Int, _Int, _Int, bool]
"""(stride_h, stride_w, dilation_h, dilation_w, same_padding)"""

class _PreparedLayer:
    """What the prepared layers share (a stub-only base: each is its own native class)."""
    def _capsule(self) -> object: ...
    def run(self, x: _Array, out: _Array | None = None) -> NDArray[np.int8]: ...
    @property
    def _float_requantization(self) -> bool: ...

class Qs8FullyConnected(_PreparedLayer):
    def __init__(
        self, weights: _Array, bias: _Array | None, input_zero_point: _Int, requantization: _DoubleRequantization
    ) -> None: ...
    @property
    def input_size(self) -> int: ...
    @property
    def output_size(self) -> int: ...

class Qs8Conv2d(_PreparedLayer):
    def __init__(
        self,
        weights: _Array,
        bias: _Array | None,
        input_zero_point: _Int,
        requantization: _Requantization,
        spatial: _Spatial,
    ) -> None: ...

class Qs8DepthwiseConv2d(_PreparedLayer):
    def __init__(
        self,
        weights: _Array,
        bias: _Array | None,
        depth_multiplier: _Int,
        input_zero_point: _Int,
        requantization: _Requantization,
        spatial: _Spatial,
    ) -> None: ...

class DetectionDecoder:
    def __call__(self, boxes: _Array, scores: _Array) -> tuple[_Array, _Array, _Array, _Array]:
        """(boxes, keypoints, scores, anchor indices) of the detections kept."""
        ...
    def __init__(
        self,
        anchors: _Array,
        num_coords: _Int,
        num_keypoints: _Int,
        x_scale: _Float,
        y_scale: _Float,
        w_scale: _Float,
        h_scale: _Float,
        score_clip: _Float,
        sigmoid: bool,
        raw_threshold: _Float,
        q_threshold: _Int,
        box_scale: _Float,
        box_zero_point: _Int,
        score_scale: _Float,
        score_zero_point: _Int,
        iou_threshold: _Float,
        nms: _Int,
        max_detections: _Int,
    ) -> None: ...

class ImagePlan:
    """
    A validated frame-to-tensor plan (see edgeinf.preprocess).
    """
    def __init__(
        self,
        format: str,
        src_size: tuple[_Int, _Int],
        roi: Sequence[_Int],
        out_size: Sequence[_Int],
        layout: str,
        dtype: str,
        resize: str,
        letterbox: bool,
        bgr_out: bool,
        yuv_range: str,
        scale: Sequence[_Float],
        bias: Sequence[_Float],
        pad: Sequence[_Float],
        qmin: _Float,
        qmax: _Float,
        threads: _Int,
    ) -> None: ...
    def _capsule(self) -> object:
        """
        The plan's address for _run_plan; the capsule keeps the plan alive.
        """
    def run(self, frame: _Array, out: _Array) -> None:
        """
        Convert one frame into `out` (validated first).
        """
    @property
    def content(self) -> list[int]: ...
    @property
    def roi(self) -> list[int]: ...

class EngineProgram:
    def __init__(self, arena_bytes: _Int, threads: _Int = 1) -> None: ...
    def __len__(self) -> int: ...
    def add(
        self,
        x_offset: _Int,
        y_offset: _Int,
        out_offset: _Int,
        shape: Sequence[_Int],
        x_strides: Sequence[_Int],
        y_strides: Sequence[_Int],
        params: Sequence[_Int],
        subtract: bool = False,
    ) -> None: ...
    def add_channel_lut(
        self,
        op: str,
        x_offset: _Int,
        y_offset: _Int,
        out_offset: _Int,
        n: _Int,
        params: Sequence[_Int],
        tables: _Array,
        split: _Int,
    ) -> None: ...
    def channel_lut(
        self, op: str, in_offset: _Int, out_offset: _Int, n: _Int, tables: _Array, split: _Int = -128
    ) -> None: ...
    def concat(self, out_offset: _Int, outer: _Int, parts: Sequence[tuple[_Int, _Int]]) -> None: ...
    def conv2d(
        self,
        in_offset: _Int,
        out_offset: _Int,
        weights: _Array,
        bias: _Array | None,
        input_zero_point: _Int,
        multiplier: _Array,
        shift: _Array,
        output_zero_point: _Int,
        act_min: _Int,
        act_max: _Int,
        geometry: Sequence[_Int],
    ) -> None: ...
    def copy(self, src_offset: _Int, dst_offset: _Int, bytes: _Int) -> None: ...
    def depthwise_conv2d(
        self,
        in_offset: _Int,
        out_offset: _Int,
        weights: _Array,
        bias: _Array | None,
        depth_multiplier: _Int,
        input_zero_point: _Int,
        multiplier: _Array,
        shift: _Array,
        output_zero_point: _Int,
        act_min: _Int,
        act_max: _Int,
        geometry: Sequence[_Int],
    ) -> None: ...
    def depthwise_conv2d_padded(
        self,
        in_offset: _Int,
        out_offset: _Int,
        padded_channels: _Int,
        weights: _Array,
        bias: _Array | None,
        input_zero_point: _Int,
        multiplier: _Array,
        shift: _Array,
        output_zero_point: _Int,
        act_min: _Int,
        act_max: _Int,
        geometry: Sequence[_Int],
    ) -> None: ...
    def dequantize(
        self, in_offset: _Int, out_offset: _Int, n: _Int, scale: _Float, zero_point: _Int, is_unsigned: bool
    ) -> None: ...
    def fully_connected(
        self,
        in_offset: _Int,
        out_offset: _Int,
        rows: _Int,
        weights: _Array,
        bias: _Array | None,
        input_zero_point: _Int,
        scale: _Array,
        output_zero_point: _Int,
        act_min: _Int,
        act_max: _Int,
    ) -> None: ...
    def gather(
        self, op: str, in_offset: _Int, in_bytes: _Int, out_offset: _Int, starts: _Array, run_bytes: _Int
    ) -> None: ...
    def lut(self, op: str, in_offset: _Int, out_offset: _Int, n: _Int, table: _Array) -> None: ...
    def mean(
        self,
        in_offset: _Int,
        out_offset: _Int,
        outer: _Int,
        count: _Int,
        inner: _Int,
        multiplier: _Int,
        shift: _Int,
        input_zero_point: _Int,
        output_zero_point: _Int,
    ) -> None: ...
    def mul(
        self,
        x_offset: _Int,
        y_offset: _Int,
        out_offset: _Int,
        shape: Sequence[_Int],
        x_strides: Sequence[_Int],
        y_strides: Sequence[_Int],
        params: Sequence[_Int],
    ) -> None: ...
    def pad(
        self,
        in_offset: _Int,
        out_offset: _Int,
        in_shape: Sequence[_Int],
        before: Sequence[_Int],
        out_shape: Sequence[_Int],
        element_bytes: _Int,
        value: _Int,
    ) -> None: ...
    def pool(
        self, is_max: bool, in_offset: _Int, out_offset: _Int, geometry: Sequence[_Int], act_min: _Int, act_max: _Int
    ) -> None: ...
    def prelu(
        self,
        in_offset: _Int,
        out_offset: _Int,
        n: _Int,
        input_zero_point: _Int,
        output_zero_point: _Int,
        positive_multiplier: _Int,
        positive_shift: _Int,
        negative_multiplier: _Int,
        negative_shift: _Int,
        alpha: _Array,
        tables: _Array,
    ) -> None: ...
    def profile(self, runs: _Int) -> list[float]:
        """
        Runs the program `runs` times timing each step: the median seconds per step.
        """
    def quantize(self, in_offset: _Int, out_offset: _Int, n: _Int, scale: _Float, zero_point: _Int) -> None: ...
    def resize_bilinear(
        self,
        in_offset: _Int,
        out_offset: _Int,
        batch: _Int,
        in_h: _Int,
        in_w: _Int,
        channels: _Int,
        ys: Sequence[_Array],
        xs: Sequence[_Array],
    ) -> None: ...
    def run(self) -> None: ...
    def softmax(
        self, in_offset: _Int, out_offset: _Int, rows: _Int, depth: _Int, input_scale: _Float, beta: _Float
    ) -> None: ...
    def step_names(self) -> list[str]: ...
    def view(self, offset: _Int, shape: Sequence[_Int], dtype: np.dtype[Any]) -> _Array: ...
    def write(self, offset: _Int, data: _Array) -> None: ...
    @property
    def arena_bytes(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def runs_alone(self) -> int: ...

def _gemm_variant() -> str:
    """
    Test probe: the path whose int8 GEMM (fully connected, convolution) runs now.
    """

def _parallel_for_probe(count: _Int, max_threads: _Int, fail_at: _Int = -1) -> tuple[list[int], int]:
    """
    Test probe of the thread pool: runs `count` tasks on at most `max_threads` threads (task `fail_at` throws); returns (runs per task, threads used).
    """

def _run_layer(capsule: object, x: _Array, out: _Array | None = None, /) -> NDArray[np.int8]:
    """
    A prepared layer's run(x, out) by its _capsule() (the per-call path).
    """

def _run_plan(capsule: object, frame: _Array, out: _Array, /) -> None:
    """
    ImagePlan.run(frame, out) of ImagePlan._capsule() (the per-frame path).
    """

def activation_range(activation: _Int, scale: _Float, zero_point: _Int) -> tuple[int, int]: ...
def active_isa() -> str: ...
def add(a: _Array, b: _Array, params: Sequence[_Int], out: _Array | None = None) -> NDArray[np.int8]:
    """
    ADD of equal shapes; params: the 12 fields of qs8::AddParams in order.
    """

def add_prepared(a: _Array, b: _Array, params: Sequence[_Int], out: _Array | None = None) -> NDArray[np.int8]:
    """
    ADD as the engine runs it: through its linear form where one is exact (add_linear_form).
    """

def add_linear_form(params: Sequence[_Int]) -> tuple[int, int, int, int, int] | None:
    """
    ADD's linear form (x_coefficient, y_coefficient, bias, shift, int16_step), exact on all
    65536 input pairs, or None; int16_step is -1 for the int32 form.
    """

def best_isa() -> str: ...
def built_isas() -> list[str]: ...
def cpu_features() -> dict[str, bool]: ...
def dequantize(
    q: _Array, scales: _Array, zero_points: _Array, outer: _Int, inner: _Int, out: _Array | None = None
) -> NDArray[np.float32]: ...
def emulated_isas() -> list[str]:
    """
    Test paths usable here that emulate an instruction exactly with ones the CPU has.
    """

def logistic(x: _Array, input_scale: _Float, input_zero_point: _Int, out: _Array | None = None) -> NDArray[np.int8]: ...
def mul(a: _Array, b: _Array, params: Sequence[_Int], out: _Array | None = None) -> NDArray[np.int8]:
    """
    MUL of equal shapes; params: the 7 fields of qs8::MulParams in order.
    """

def multiply_by_quantized_multiplier(x: _Array, multiplier: _Int, shift: _Int) -> NDArray[np.int32]: ...
def non_max_suppression(
    boxes: _Array, keypoints: _Array, scores: _Array, iou_threshold: _Float, weighted: bool, max_detections: _Int = ...
) -> dict[str, Any]: ...
def pool(
    is_max: bool,
    x: _Array,
    filter_h: _Int,
    filter_w: _Int,
    stride_h: _Int,
    stride_w: _Int,
    out_h: _Int,
    out_w: _Int,
    pad_top: _Int,
    pad_left: _Int,
    act_min: _Int = -128,
    act_max: _Int = 127,
    out: _Array | None = None,
) -> NDArray[np.int8]: ...
def pool_threads() -> int:
    """
    Threads a parallel kernel can use: the pool's workers plus the caller.
    """

def quantize(
    x: _Array, scales: _Array, zero_points: _Array, outer: _Int, inner: _Int, out: _Array | None = None
) -> NDArray[np.int8]: ...
def quantize_multiplier(real_multiplier: _Float) -> tuple[int, int]: ...
def requantize(
    acc: _Array,
    multiplier: _Array,
    shift: _Array,
    zero_point: _Int,
    act_min: _Int = -128,
    act_max: _Int = 127,
    out: _Array | None = None,
) -> NDArray[np.int8]: ...
def set_isa(name: str) -> str:
    """
    Force a kernel path; returns the previous one. Raises InputError if unusable.
    """

def softmax(x: _Array, input_scale: _Float, beta: _Float = 1.0, out: _Array | None = None) -> NDArray[np.int8]: ...
def softmax_params(input_scale: _Float, beta: _Float = 1.0) -> tuple[int, int, int]: ...
def supported_isas() -> list[str]: ...
def top_k(x: _Array, k: _Int) -> tuple[NDArray[np.int64], _Array]:
    """(indices, values) of the k largest along the last axis."""
    ...

def warp_affine(
    image: _Array,
    out: _Array,
    matrix: Sequence[_Float],
    index: Sequence[_Int],
    scale: Sequence[_Float],
    bias: Sequence[_Float],
) -> None:
    """Bilinear affine crop of a uint8 image into a float32 HxWxC tensor (black outside the image)."""
