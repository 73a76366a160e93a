"""Plan a verified .tflite graph for the int8 engine, once, at load.

The plan turns the graph into steps of the native Program (``edgeinf._C.EngineProgram``):

- every operator is checked and its quantization parameters derived as TFLite's
  ``Prepare`` derives them (`quantization`); anything the engine cannot run exactly raises
  `UnsupportedOperatorError` (the caller falls back to LiteRT), parameters TFLite itself
  refuses raise `ModelFileError`;
- a standalone RELU / RELU6 / RELU_N1_TO_1 that only rescales by one is folded into the
  clamp of the conv / depthwise / fully connected op that feeds it;
- RESHAPE and SQUEEZE share their input's memory (no step at all);
- tensor lifetimes give one arena: each tensor gets an offset, greedily by size, where no
  tensor alive at the same time lies (TFLite's own arena planner does the same).

>>> plan = plan_model(read_tflite(path))          # doctest: +SKIP
>>> plan.summary()["ops"]                         # doctest: +SKIP
{'CONV_2D': 12, 'DEPTHWISE_CONV_2D': 9, ...}
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _C
from ..errors import ModelFileError, UnsupportedOperatorError
from ..formats.tflite import Operator, Tensor, TfliteModel
from ..isa import AVX2_PATHS, AVX512_PATHS
from ..quant import conv_output_size
from . import quantization as qz
from .float_islands import FloatIsland, find_islands, island_tables
from .quantization import ActQuant, where

log = logging.getLogger(__name__)

ALIGNMENT = 64
MAX_ARENA_BYTES = 1 << 31
"""Activations beyond 2 GB are not something a board runs; a larger plan is refused."""

_PADDING = {0: "same", 1: "valid"}
_DW_BLOCK = 16  # channels per SIMD block of the depthwise kernels
_RELUS = {"RELU": "relu", "RELU6": "relu6", "RELU_N1_TO_1": "relu_n1_to_1"}
_RELU_BOUNDS = {"relu": (0.0, None), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}


@dataclass
class Step:
    """One native step: ``method`` of the Program with ``args``; values of the keys in
    ``tensors`` are tensor indices, replaced by arena offsets when the Program is built."""

    op: str  # the TFLite operator name it runs
    nodes: tuple[int, ...]  # the graph's operator indices it covers (fused ones included)
    method: str
    args: dict[str, Any]
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    fused: tuple[str, ...] = ()


@dataclass
class Plan:
    """The engine's plan of a model: steps, arena layout, inputs and outputs."""

    steps: list[Step]
    offsets: dict[int, int]  # tensor index -> arena offset
    arena_bytes: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    tensors: tuple[Tensor, ...]
    constants: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (tensor, data) copied into the arena

    def summary(self) -> dict:
        ops = Counter(s.op + ("+" + "+".join(s.fused) if s.fused else "") for s in self.steps)
        return {"steps": len(self.steps), "ops": dict(ops), "arena_bytes": self.arena_bytes}


# Where each fusable step keeps its output clamp: two keys of its args, or two indices
# into its "params" tuple (ADD, MUL).
_CLAMP_SLOTS = {
    "conv2d": ("act_min", "act_max"),
    "depthwise_conv2d": ("act_min", "act_max"),
    "fully_connected": ("act_min", "act_max"),
    "add": (10, 11),
    "mul": (5, 6),
}


def _get_clamp(step: Step, slots) -> tuple[int, int]:
    source = step.args["params"] if isinstance(slots[0], int) else step.args
    return source[slots[0]], source[slots[1]]


def _set_clamp(step: Step, slots, lo: int, hi: int) -> None:
    if isinstance(slots[0], int):
        params = list(step.args["params"])
        params[slots[0]], params[slots[1]] = lo, hi
        step.args["params"] = tuple(params)
    else:
        step.args[slots[0]], step.args[slots[1]] = lo, hi


def _pads_depthwise(c: int, stride_w: int) -> bool:
    """Whether a depthwise layer of c channels runs with its channels padded to a multiple
    of 16: on the AVX2 paths, for 8 to 15 channels, which its kernel (blocks of 16, the last
    one overlapping the one before) would take in a scalar tail, except where the AVX-512
    kernel (avx512vnni, avx512amx) runs them at a horizontal stride of 1 as one run of values per output row (its
    flat schedule, any channel count). The NEON kernels end any count from 8 up with a block
    of 16 or 8 overlapping the one before, and the scalar one gains nothing from padding."""
    if c % _DW_BLOCK == 0 or c < _DW_BLOCK // 2 or c > _DW_BLOCK:
        return False
    isa = _C.active_isa()
    if stride_w == 1 and isa in AVX512_PATHS:
        return False
    return isa in AVX2_PATHS


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class _Planner:
    """Plans the main graph, or a part of it: ``operators`` (indices, in execution order)
    reading ``inputs`` and giving ``outputs`` (tensor indices), the rest left to LiteRT."""

    def __init__(self, model: TfliteModel, operators=None, inputs=None, outputs=None):
        self.model = model
        self.sg = model.main
        whole = operators is None
        if whole and len(model.subgraphs) != 1:
            raise UnsupportedOperatorError(f"the model has {len(model.subgraphs)} subgraphs (control flow)")
        self.operators = list(self.sg.operators) if whole else [self.sg.operators[i] for i in operators]
        self.inputs = tuple(self.sg.inputs if inputs is None else inputs)
        self.outputs = tuple(self.sg.outputs if outputs is None else outputs)
        self.tensors = self.sg.tensors
        self.steps: list[Step] = []
        self.alias: dict[int, int] = {}  # tensor -> the tensor whose memory it shares
        self.constants: dict[int, np.ndarray] = {}  # constants read by steps as activations
        self.islands: dict[int, tuple[FloatIsland, np.ndarray]] = {}  # operator -> its island, tables

    def find_float_islands(self) -> None:
        """The float islands whose tables TFLite's arithmetic gives; the operators of any
        other island are planned one by one (and a float one among them is refused)."""
        planned = {op.index for op in self.operators}
        for island in find_islands(self.sg):
            if any(op.index not in planned for op in island.operators):
                continue
            try:
                tables = island_tables(self.model, island)
            except (UnsupportedOperatorError, ModelFileError) as exc:
                log.debug("float chain %s stays apart: %s", island.name, exc)
                continue
            for op in island.operators:
                self.islands[op.index] = (island, tables)

    # -- tensor access -----------------------------------------------------------
    def tensor(self, op: Operator, k: int) -> Tensor:
        t = self.optional_tensor(op, k)
        if t is None:
            raise ModelFileError(f"{where(op)}: input {k} is missing")
        return t

    def optional_tensor(self, op: Operator, k: int) -> Tensor | None:
        """Input ``k`` of ``op``, or None where the model leaves it out (a bias, a pad value)."""
        if k >= len(op.inputs) or op.inputs[k] < 0:
            return None
        return self.tensors[op.inputs[k]]

    def output(self, op: Operator, k: int = 0) -> Tensor:
        if k >= len(op.outputs) or op.outputs[k] < 0:
            raise ModelFileError(f"{where(op)}: output {k} is missing")
        return self.tensors[op.outputs[k]]

    def data(self, t: Tensor | None) -> np.ndarray | None:
        return None if t is None else self.model.tensor_data(0, t.index)

    def constant(self, op: Operator, t: Tensor, what: str) -> np.ndarray:
        value = self.data(t)
        if value is None:
            raise UnsupportedOperatorError(f"{where(op, t)}: the {what} must be a constant")
        return value

    def activation_input(self, op: Operator, t: Tensor) -> int:
        """An op input read as an activation; a constant one is copied into the arena."""
        if t.is_constant:
            self.constants[t.index] = self.constant(op, t, "constant operand")
        return t.index

    def shape4(self, op: Operator, t: Tensor) -> tuple[int, int, int, int]:
        if len(t.shape) != 4:
            raise ModelFileError(f"{where(op, t)}: expected a 4-D NHWC tensor, got shape {list(t.shape)}")
        n, h, w, c = (int(d) for d in t.shape)
        return n, h, w, c

    def expect_shape(self, op: Operator, t: Tensor, shape) -> None:
        if tuple(t.shape) != tuple(shape):
            raise ModelFileError(f"{where(op, t)}: expected shape {list(shape)}, the model says {list(t.shape)}")

    def add(self, op: Operator, method: str, args: dict, reads, writes) -> None:
        self.steps.append(Step(op.opcode.name, (op.index,), method, args, tuple(reads), tuple(writes)))

    # -- the graph -----------------------------------------------------------------
    def plan(self) -> Plan:
        used = {t for op in self.operators for t in (*op.inputs, *op.outputs) if t >= 0}
        self.check_tensors(sorted(used | set(self.inputs) | set(self.outputs)))
        self.find_float_islands()
        for op in self.operators:
            if op.index in self.islands:
                island, tables = self.islands[op.index]
                if op is island.dequantize:
                    self.float_island(island, tables)
                continue
            handler = getattr(self, "op_" + op.opcode.name.lower(), None)
            if handler is None or op.opcode.is_custom:
                raise UnsupportedOperatorError(f"{where(op)} is not an operator the engine runs")
            handler(op)
        self.fuse_relus()
        self.fuse_add_tables()
        return self.layout()

    def check_tensors(self, indices) -> None:
        for t in (self.tensors[i] for i in indices):
            if t.is_dynamic:
                raise UnsupportedOperatorError(
                    f"tensor {t.index} {t.name!r} has a dynamic shape {list(t.shape_signature)}"
                )
            if any(d <= 0 for d in t.shape) and not t.is_constant:
                raise UnsupportedOperatorError(f"tensor {t.index} {t.name!r} has an empty shape {list(t.shape)}")
            if t.sparsity is not None or t.is_variable:
                raise UnsupportedOperatorError(f"tensor {t.index} {t.name!r} is sparse or a variable")
            q = t.quantization
            if q is not None and q.scales and not 0 <= q.quantized_dimension < max(len(t.shape), 1):
                # TFLite refuses this when it builds the interpreter, even for one scale.
                raise ModelFileError(
                    f"tensor {t.index} {t.name!r}: quantized_dimension {q.quantized_dimension} is outside "
                    f"its {len(t.shape)} dimensions"
                )

    # -- operators with weights ------------------------------------------------------
    def conv_common(self, op: Operator, *, depthwise: bool):
        x, w, b, y = self.tensor(op, 0), self.tensor(op, 1), self.optional_tensor(op, 2), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        n, h, wd, c = self.shape4(op, x)
        weights = self.constant(op, w, "filter")
        if weights.ndim != 4:
            raise ModelFileError(f"{where(op, w)}: expected a 4-D filter, got shape {list(weights.shape)}")
        o = weights.shape[3] if depthwise else weights.shape[0]
        scales = qz.weight_scales(op, w, o, 3 if depthwise else 0)
        bias = qz.bias(op, b, self.data(b), o, in_q.scale, scales, out_q.scale)
        opts = op.options
        kind = qz.fused_activation(op, opts.get("fused_activation_function", 0))
        act_min, act_max = qz.activation_range(op, kind, out_q)
        padding = _PADDING.get(opts.get("padding", 0))
        stride = (opts.get("stride_h", 1), opts.get("stride_w", 1))
        dilation = (opts.get("dilation_h_factor", 1), opts.get("dilation_w_factor", 1))
        if padding is None or min(stride + dilation) < 1:
            raise ModelFileError(f"{where(op)}: padding {opts.get('padding')}, strides {stride}, dilations {dilation}")
        kh, kw = weights.shape[1:3]
        try:
            oh, pt = conv_output_size(h, kh, stride[0], dilation[0], padding)
            ow, pl = conv_output_size(wd, kw, stride[1], dilation[1], padding)
        except ValueError as exc:
            raise ModelFileError(f"{where(op)}: {exc}") from None
        self.expect_shape(op, y, (n, oh, ow, o))
        # Conv and depthwise take the float64 product (PopulateConvolutionQuantizationParams).
        multiplier, shift = qz.multipliers(op, [in_q.scale * s / out_q.scale for s in scales])
        geometry = (n, h, wd, c, oh, ow, *stride, *dilation, pt, pl)
        args = dict(
            in_offset=x.index, out_offset=y.index, weights=weights.astype(np.int8), bias=bias,
            input_zero_point=in_q.zero_point, multiplier=multiplier, shift=shift,
            output_zero_point=out_q.zero_point, act_min=act_min, act_max=act_max, geometry=geometry,
        )  # fmt: skip
        return x, y, args, c, o

    def op_conv_2d(self, op: Operator) -> None:
        x, y, args, c, o = self.conv_common(op, depthwise=False)
        if args["weights"].shape[3] != c:
            raise UnsupportedOperatorError(
                f"{where(op)}: a grouped convolution ({c} input channels, filter of {args['weights'].shape[3]})"
            )
        self.add(op, "conv2d", args, [x.index], [y.index])

    def op_depthwise_conv_2d(self, op: Operator) -> None:
        x, y, args, c, o = self.conv_common(op, depthwise=True)
        if args["weights"].shape[0] != 1 or o % c:
            raise ModelFileError(
                f"{where(op)}: filter of shape {list(args['weights'].shape)} does not fit {c} input channels"
            )
        args["depth_multiplier"] = o // c
        if o == c and _pads_depthwise(c, stride_w=args["geometry"][7]):
            self.pad_depthwise_channels(args, c)
        self.add(op, args.pop("method", "depthwise_conv2d"), args, [x.index], [y.index])

    @staticmethod
    def pad_depthwise_channels(args: dict, c: int) -> None:
        """Run a depthwise layer of c channels as one of a multiple of 16 (zero weights and
        bias, channel 0's requantization on the padding): the SIMD kernels then never take
        their scalar per-pixel tail. The real channels' results do not change."""
        padded = -(-c // _DW_BLOCK) * _DW_BLOCK
        extra = padded - c
        weights = np.zeros((*args["weights"].shape[:3], padded), np.int8)
        weights[..., :c] = args["weights"]
        args["weights"] = weights
        if args["bias"] is not None:
            args["bias"] = np.concatenate([args["bias"], np.zeros(extra, np.int32)])
        for key in ("multiplier", "shift"):
            args[key] = np.concatenate([args[key], np.full(extra, args[key][0], np.int32)])
        del args["depth_multiplier"]
        args["padded_channels"] = padded
        args["method"] = "depthwise_conv2d_padded"

    def op_fully_connected(self, op: Operator) -> None:
        x, w, b, y = self.tensor(op, 0), self.tensor(op, 1), self.optional_tensor(op, 2), self.output(op)
        opts = op.options
        if opts.get("weights_format", 0) != 0:
            raise UnsupportedOperatorError(f"{where(op)}: shuffled weights format {opts.get('weights_format')}")
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        weights = self.constant(op, w, "filter")
        if weights.ndim != 2:
            raise ModelFileError(f"{where(op, w)}: expected a 2-D [N, K] filter, got shape {list(weights.shape)}")
        n, k = weights.shape
        if x.num_elements % k:
            raise ModelFileError(f"{where(op, x)}: {x.num_elements} values do not split into rows of {k}")
        rows = x.num_elements // k
        if y.num_elements != rows * n:
            raise ModelFileError(f"{where(op, y)}: expected {rows} x {n} values, the model says {list(y.shape)}")
        scales = qz.weight_scales(op, w, n, 0)
        bias = qz.bias(op, b, self.data(b), n, in_q.scale, scales, out_q.scale)
        kind = qz.fused_activation(op, opts.get("fused_activation_function", 0))
        act_min, act_max = qz.activation_range(op, kind, out_q)
        # TFLite's reference FULLY_CONNECTED requantizes in double with this factor.
        scale = np.array([in_q.scale * s / out_q.scale for s in scales], np.float64)
        if not np.all(np.isfinite(scale)):
            raise UnsupportedOperatorError(f"{where(op)}: a requantization factor that is not finite")
        args = dict(
            in_offset=x.index, out_offset=y.index, rows=rows, weights=weights.astype(np.int8), bias=bias,
            input_zero_point=in_q.zero_point, scale=scale, output_zero_point=out_q.zero_point,
            act_min=act_min, act_max=act_max,
        )  # fmt: skip
        self.add(op, "fully_connected", args, [x.index], [y.index])

    # -- elementwise -----------------------------------------------------------------
    def broadcast(self, op: Operator, a: Tensor, b: Tensor, y: Tensor):
        try:
            shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        except ValueError:
            raise ModelFileError(f"{where(op)}: shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
        if tuple(shape) != tuple(y.shape):
            raise ModelFileError(f"{where(op, y)}: expected shape {list(shape)}, the model says {list(y.shape)}")
        if len(shape) > 4:
            raise UnsupportedOperatorError(f"{where(op)}: broadcasting over {len(shape)} dimensions")
        out4 = (1,) * (4 - len(shape)) + tuple(shape)

        def strides(t: Tensor):
            s4 = (1,) * (4 - len(t.shape)) + tuple(t.shape)
            result, step = [0, 0, 0, 0], 1
            for d in range(3, -1, -1):
                result[d] = step if s4[d] == out4[d] else 0
                step *= s4[d]
            return tuple(result)

        return out4, strides(a), strides(b)

    def op_sub(self, op: Operator) -> None:
        self.op_add(op, subtract=True)

    def op_add(self, op: Operator, subtract: bool = False) -> None:
        a, b, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        qa, qb, qo = qz.activation(op, a), qz.activation(op, b), qz.activation(op, y)
        shape, sa, sb = self.broadcast(op, a, b, y)
        left_shift = 20
        twice_max = 2.0 * max(qa.scale, qb.scale)
        real_out = twice_max / float(np.float32((1 << left_shift) * np.float32(qo.scale)))
        if not 0.0 < real_out < 1.0:
            raise UnsupportedOperatorError(f"{where(op)}: output scale {qo.scale!r} too small for its inputs")
        (ma, sha), (mb, shb), (mo, sho) = (
            _C.quantize_multiplier(r) for r in (qa.scale / twice_max, qb.scale / twice_max, real_out)
        )
        kind = qz.fused_activation(op, op.options.get("fused_activation_function", 0))
        lo, hi = qz.activation_range(op, kind, qo)
        params = (-qa.zero_point, -qb.zero_point, left_shift, ma, sha, mb, shb, mo, sho, qo.zero_point, lo, hi)
        if min(sha, shb, sho) < -31:
            raise UnsupportedOperatorError(f"{where(op)}: input scales too far apart")
        args = dict(x_offset=self.activation_input(op, a), y_offset=self.activation_input(op, b), out_offset=y.index,
                    shape=shape, x_strides=sa, y_strides=sb, params=params, subtract=subtract)  # fmt: skip
        self.add(op, "add", args, [a.index, b.index], [y.index])

    def op_mul(self, op: Operator) -> None:
        a, b, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        qa, qb, qo = qz.activation(op, a), qz.activation(op, b), qz.activation(op, y)
        shape, sa, sb = self.broadcast(op, a, b, y)
        # TFLite multiplies and divides the three scales in float32 before widening.
        real = float(np.float32(np.float32(qa.scale) * np.float32(qb.scale)) / np.float32(qo.scale))
        m, s = _C.quantize_multiplier(real)
        if not -31 <= s <= 14:
            raise UnsupportedOperatorError(f"{where(op)}: scale ratio {real!r} out of the kernel's range")
        kind = qz.fused_activation(op, op.options.get("fused_activation_function", 0))
        lo, hi = qz.activation_range(op, kind, qo)
        params = (-qa.zero_point, -qb.zero_point, m, s, qo.zero_point, lo, hi)
        args = dict(x_offset=self.activation_input(op, a), y_offset=self.activation_input(op, b), out_offset=y.index,
                    shape=shape, x_strides=sa, y_strides=sb, params=params)  # fmt: skip
        self.add(op, "mul", args, [a.index, b.index], [y.index])

    # -- pooling -------------------------------------------------------------------
    def pool(self, op: Operator, is_max: bool) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        if (in_q.scale, in_q.zero_point) != (out_q.scale, out_q.zero_point):
            raise UnsupportedOperatorError(f"{where(op)}: input and output quantization differ")
        n, h, w, c = self.shape4(op, x)
        opts = op.options
        padding = _PADDING.get(opts.get("padding", 0))
        fh, fw = opts.get("filter_height", 1), opts.get("filter_width", 1)
        sh, sw = opts.get("stride_h", 1), opts.get("stride_w", 1)
        if padding is None or min(fh, fw, sh, sw) < 1:
            raise ModelFileError(f"{where(op)}: filter {fh}x{fw}, strides {sh}x{sw}, padding {opts.get('padding')}")
        try:
            oh, pt = conv_output_size(h, fh, sh, 1, padding)
            ow, pl = conv_output_size(w, fw, sw, 1, padding)
        except ValueError as exc:
            raise ModelFileError(f"{where(op)}: {exc}") from None
        self.expect_shape(op, y, (n, oh, ow, c))
        kind = qz.fused_activation(op, opts.get("fused_activation_function", 0))
        lo, hi = qz.activation_range(op, kind, out_q)
        geometry = (n, h, w, c, oh, ow, fh, fw, sh, sw, pt, pl)
        args = dict(is_max=is_max, in_offset=x.index, out_offset=y.index, geometry=geometry, act_min=lo, act_max=hi)
        self.add(op, "pool", args, [x.index], [y.index])

    def op_max_pool_2d(self, op: Operator) -> None:
        self.pool(op, True)

    def op_average_pool_2d(self, op: Operator) -> None:
        self.pool(op, False)

    # -- shape and data movement ------------------------------------------------------
    def share(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        if x.dtype != y.dtype or x.num_elements != y.num_elements:
            raise ModelFileError(f"{where(op)}: {x.dtype}{list(x.shape)} cannot become {y.dtype}{list(y.shape)}")
        if x.is_constant:
            raise UnsupportedOperatorError(f"{where(op)}: reshaping a constant")
        self.alias[y.index] = x.index
        self.steps.append(Step(op.opcode.name, (op.index,), "", {}, (x.index,), (y.index,)))

    op_reshape = share
    op_squeeze = share

    def gather(self, op: Operator, x: Tensor, y: Tensor, index: np.ndarray) -> None:
        """A step that fills ``y`` with ``x``'s elements at ``index`` (flat indices into x, of
        y's shape), copied in runs as long as the index stays contiguous."""
        if x.dtype != y.dtype or x.numpy_dtype is None:
            raise UnsupportedOperatorError(f"{where(op)}: {x.dtype} to {y.dtype}")
        if x.is_constant:
            raise UnsupportedOperatorError(f"{where(op)}: a constant input")
        self.expect_shape(op, y, index.shape)
        flat = index.reshape(-1).astype(np.int64)
        run = 1
        for d in reversed(index.shape):
            candidate = run * int(d)
            rows = flat.reshape(-1, candidate)
            if candidate > 1 and not (np.diff(rows, axis=1) == 1).all():
                break
            run = candidate
        item = x.numpy_dtype.itemsize
        starts = np.ascontiguousarray(flat.reshape(-1, run)[:, 0] * item) if flat.size else np.zeros(0, np.int64)
        args = dict(op=op.opcode.name, in_offset=x.index, in_bytes=x.nbytes, out_offset=y.index, starts=starts,
                    run_bytes=run * item)  # fmt: skip
        self.add(op, "gather", args, [x.index], [y.index])

    @staticmethod
    def flat_index(t: Tensor) -> np.ndarray:
        return np.arange(t.num_elements, dtype=np.int64).reshape(t.shape)

    def op_transpose(self, op: Operator) -> None:
        x, perm_tensor, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        perm = [int(p) for p in self.constant(op, perm_tensor, "permutation").reshape(-1)]
        if sorted(p % max(len(x.shape), 1) for p in perm) != list(range(len(x.shape))):
            raise ModelFileError(f"{where(op, perm_tensor)}: {perm} is not a permutation of {len(x.shape)} axes")
        self.gather(op, x, y, self.flat_index(x).transpose(perm))

    def split_parts(self, op: Operator, x: Tensor, axis: int, sizes: list[int]) -> None:
        rank = len(x.shape)
        if not -rank <= axis < rank:
            raise ModelFileError(f"{where(op)}: split axis {axis} out of range for rank {rank}")
        axis %= rank
        if len(sizes) != len(op.outputs) or sum(sizes) != x.shape[axis] or min(sizes, default=0) < 0:
            raise ModelFileError(f"{where(op)}: sizes {sizes} do not split {x.shape[axis]} into {len(op.outputs)}")
        index = self.flat_index(x)
        begin = 0
        for k, size in enumerate(sizes):
            part = np.take(index, np.arange(begin, begin + size), axis=axis)
            self.gather(op, x, self.output(op, k), part)
            begin += size

    def op_split(self, op: Operator) -> None:
        axis_tensor, x = self.tensor(op, 0), self.tensor(op, 1)
        axis = int(self.constant(op, axis_tensor, "axis").reshape(-1)[0])
        n = len(op.outputs)
        dim = x.shape[axis % max(len(x.shape), 1)] if x.shape else 0
        if n < 1 or dim % n:
            raise ModelFileError(f"{where(op)}: {dim} does not split into {n} equal parts")
        self.split_parts(op, x, axis, [dim // n] * n)

    def op_split_v(self, op: Operator) -> None:
        x, sizes_tensor, axis_tensor = self.tensor(op, 0), self.tensor(op, 1), self.tensor(op, 2)
        axis = int(self.constant(op, axis_tensor, "axis").reshape(-1)[0])
        sizes = [int(v) for v in self.constant(op, sizes_tensor, "size_splits").reshape(-1)]
        if sizes.count(-1) == 1:  # one size inferred from the others
            rest = x.shape[axis % len(x.shape)] - sum(v for v in sizes if v != -1)
            sizes = [rest if v == -1 else v for v in sizes]
        self.split_parts(op, x, axis, sizes)

    def op_strided_slice(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        begin, end, strides = (
            [int(v) for v in self.constant(op, self.tensor(op, k), what).reshape(-1)]
            for k, what in ((1, "begin"), (2, "end"), (3, "strides"))
        )
        opts = op.options
        if opts.get("ellipsis_mask", 0) or opts.get("new_axis_mask", 0) or opts.get("offset", False):
            raise UnsupportedOperatorError(f"{where(op)}: ellipsis, new axis or offset masks")
        rank = len(x.shape)
        if not len(begin) == len(end) == len(strides) == rank or 0 in strides:
            raise ModelFileError(f"{where(op)}: begin {begin}, end {end}, strides {strides} for rank {rank}")
        keys: list[int | slice] = []
        for d in range(rank):
            bit = 1 << d
            if opts.get("shrink_axis_mask", 0) & bit:
                i = begin[d] + x.shape[d] if begin[d] < 0 else begin[d]
                if not 0 <= i < x.shape[d]:
                    raise ModelFileError(f"{where(op)}: index {begin[d]} out of range for axis {d} of {x.shape[d]}")
                keys.append(i)
                continue
            start = None if opts.get("begin_mask", 0) & bit else begin[d]
            stop = None if opts.get("end_mask", 0) & bit else end[d]
            keys.append(slice(start, stop, strides[d]))
        self.gather(op, x, y, self.flat_index(x)[tuple(keys)])

    def op_resize_nearest_neighbor(self, op: Operator) -> None:
        x, size_tensor, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        n, h, w, c = self.shape4(op, x)
        out_h, out_w = (int(v) for v in self.constant(op, size_tensor, "size").reshape(-1)[:2])
        align = bool(op.options.get("align_corners", False))
        half = bool(op.options.get("half_pixel_centers", False))

        def source(out_size: int, in_size: int) -> np.ndarray:
            # reference_ops::ResizeNearestNeighbor, in float32.
            scale = np.float32(in_size) / np.float32(out_size)
            if align and out_size > 1:
                scale = np.float32(in_size - 1) / np.float32(out_size - 1)
            offset = np.float32(0.5 if half else 0.0)
            pos = (np.arange(out_size, dtype=np.float32) + offset) * scale
            if align:
                idx = np.array([qz.round_half_away(float(v)) for v in pos], np.int64)
            else:
                idx = np.floor(pos).astype(np.int64)
            idx = np.minimum(idx, in_size - 1)
            return np.maximum(idx, 0) if half else idx

        if out_h < 1 or out_w < 1:
            raise ModelFileError(f"{where(op, size_tensor)}: output size {out_h}x{out_w}")
        ys, xs = source(out_h, h), source(out_w, w)
        index = self.flat_index(x)[:, ys][:, :, xs]
        self.gather(op, x, y, index)

    def op_resize_bilinear(self, op: Operator) -> None:
        x, size_tensor, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        qz.activation(op, x)
        qz.activation(op, y)
        n, h, w, c = self.shape4(op, x)
        out_h, out_w = (int(v) for v in self.constant(op, size_tensor, "size").reshape(-1)[:2])
        align = bool(op.options.get("align_corners", False))
        half = bool(op.options.get("half_pixel_centers", False))
        if align and half or out_h < 1 or out_w < 1:
            raise ModelFileError(f"{where(op)}: size {out_h}x{out_w}, align_corners {align}, half_pixel {half}")
        self.expect_shape(op, y, (n, out_h, out_w, c))

        def axis(out_size: int, in_size: int):
            # reference_ops::ResizeBilinearInteger: the scale and positions in 1/1024 steps.
            if align and out_size > 1:
                scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
            else:
                scale = ((1 << 10) * in_size + out_size // 2) // out_size
            lower, upper, weight = [], [], []
            for v in range(out_size):
                scaled = v * scale + scale // 2 - (1 << 9) if half else v * scale
                lo = max(qz.trunc_div(scaled, 1 << 10), 0)
                lower.append(lo)
                upper.append(min(qz.trunc_div(scaled + (1 << 10) - 1, 1 << 10), in_size - 1))
                weight.append(scaled - (1 << 10) * lo)
            return tuple(np.array(a, np.int32) for a in (lower, upper, weight))

        args = dict(in_offset=x.index, out_offset=y.index, batch=n, in_h=h, in_w=w, channels=c,
                    ys=axis(out_h, h), xs=axis(out_w, w))  # fmt: skip
        self.add(op, "resize_bilinear", args, [x.index], [y.index])

    def op_pad(self, op: Operator) -> None:
        x, paddings, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        if (in_q.scale, in_q.zero_point) != (out_q.scale, out_q.zero_point):
            raise UnsupportedOperatorError(f"{where(op)}: input and output quantization differ")
        pads = self.constant(op, paddings, "paddings").astype(np.int64)
        rank = len(x.shape)
        if pads.shape != (rank, 2) or rank > 4 or (pads < 0).any():
            raise ModelFileError(
                f"{where(op, paddings)}: expected [{rank}, 2] non-negative paddings, got {pads.tolist()}"
            )
        value = out_q.zero_point
        constant_value = self.optional_tensor(op, 2)
        if constant_value is not None:
            cv = self.constant(op, constant_value, "pad value")
            if cv.size != 1 or constant_value.dtype != x.dtype:
                raise ModelFileError(f"{where(op, constant_value)}: expected one {x.dtype} pad value")
            cq = qz.activation(op, constant_value)
            if (cq.scale, cq.zero_point) != (in_q.scale, in_q.zero_point):
                raise UnsupportedOperatorError(f"{where(op)}: the pad value has its own quantization")
            value = int(cv.reshape(-1)[0])
        out_shape = tuple(int(d) + int(p[0]) + int(p[1]) for d, p in zip(x.shape, pads))
        self.expect_shape(op, y, out_shape)
        lead = (1,) * (4 - rank)
        args = dict(
            in_offset=x.index, out_offset=y.index, in_shape=lead + tuple(x.shape),
            before=(0,) * (4 - rank) + tuple(int(p[0]) for p in pads), out_shape=lead + out_shape,
            element_bytes=1, value=value & 0xFF,
        )  # fmt: skip
        self.add(op, "pad", args, [x.index], [y.index])

    op_padv2 = op_pad

    def op_concatenation(self, op: Operator) -> None:
        y = self.output(op)
        out_q = qz.activation(op, y)
        parts = [self.tensor(op, k) for k in range(len(op.inputs))]
        if op.options.get("fused_activation_function", 0) != 0:
            raise UnsupportedOperatorError(f"{where(op)}: a fused activation on int8 concatenation")
        rank = len(y.shape)
        axis = op.options.get("axis", 0)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise ModelFileError(f"{where(op)}: axis {op.options.get('axis')} out of range for rank {rank}")
        total = 0
        for t in parts:
            q = qz.activation(op, t)
            if (q.scale, q.zero_point) != (out_q.scale, out_q.zero_point):
                raise UnsupportedOperatorError(f"{where(op, t)}: concatenation inputs with their own quantization")
            if len(t.shape) != rank or any(t.shape[d] != y.shape[d] for d in range(rank) if d != axis):
                raise ModelFileError(f"{where(op, t)}: shape {list(t.shape)} does not concatenate into {list(y.shape)}")
            total += t.shape[axis]
        if total != y.shape[axis]:
            raise ModelFileError(
                f"{where(op, y)}: inputs give {total} along axis {axis}, the model says {y.shape[axis]}"
            )
        outer = int(np.prod(y.shape[:axis], dtype=np.int64))
        pieces = [(self.activation_input(op, t), int(np.prod(t.shape[axis:], dtype=np.int64))) for t in parts]
        args = dict(out_offset=y.index, outer=outer, parts=pieces)
        self.add(op, "concat", args, [t.index for t in parts], [y.index])

    def op_mean(self, op: Operator) -> None:
        x, axis_tensor, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        rank = len(x.shape)
        raw = [int(a) for a in self.constant(op, axis_tensor, "axis").reshape(-1)]
        if not raw or any(not -rank <= a < rank for a in raw):
            raise ModelFileError(f"{where(op, axis_tensor)}: axes {raw} out of range for rank {rank}")
        axes = sorted({a % rank for a in raw})
        if axes != list(range(axes[0], axes[-1] + 1)):
            raise UnsupportedOperatorError(f"{where(op)}: a mean over axes {axes} that are not adjacent")
        keep = bool(op.options.get("keep_dims", False))
        shape = tuple(int(d) for d in x.shape)
        out_shape = (
            tuple(1 if d in axes else n for d, n in enumerate(shape))
            if keep
            else tuple(n for d, n in enumerate(shape) if d not in axes)
        )
        self.expect_shape(op, y, out_shape)
        outer = int(np.prod(shape[: axes[0]], dtype=np.int64))
        count = int(np.prod(shape[axes[0] : axes[-1] + 1], dtype=np.int64))
        inner = int(np.prod(shape[axes[-1] + 1 :], dtype=np.int64))
        if count > 1 << 22:
            raise UnsupportedOperatorError(f"{where(op)}: a mean over {count} values")
        # TFLite's QuantizedMeanOrSum: QuantizeMultiplier(s_in / s_out), then 1 / count folded
        # into it with a shift of floor(log2(count)), bounded so the final shift stays >= -31.
        (m,), (s,) = qz.multipliers(op, [in_q.scale / out_q.scale])
        folded = min(count.bit_length() - 1, 32, 31 + int(s))
        multiplier, shift = (int(m) << folded) // count, int(s) - folded
        args = dict(
            in_offset=x.index, out_offset=y.index, outer=outer, count=count, inner=inner,
            multiplier=multiplier, shift=shift, input_zero_point=in_q.zero_point, output_zero_point=out_q.zero_point,
        )  # fmt: skip
        self.add(op, "mean", args, [x.index], [y.index])

    # -- conversions and lookup tables ------------------------------------------------
    def float_island(self, island: FloatIsland, tables: np.ndarray) -> None:
        """DEQUANTIZE -> float elementwise chain -> QUANTIZE as one table step (one table
        for all values, or one per channel of the last axis)."""
        x = self.tensors[island.dequantize.inputs[0]]
        y = self.tensors[island.quantize.outputs[0]]
        args = dict(op=island.name, in_offset=x.index, out_offset=y.index, n=x.num_elements)
        if (tables == tables[0]).all():
            method, args["table"] = "lut", np.ascontiguousarray(tables[0])
        else:
            method, args["tables"] = "channel_lut", np.ascontiguousarray(tables)
            if x.dtype == "INT8":
                # Where a PRELU's lines would meet, should the tables be two lines per channel.
                args["split"] = qz.activation(island.dequantize, x, ("INT8",)).zero_point
        names = tuple(op.opcode.name for op in island.operators)
        nodes = tuple(op.index for op in island.operators)
        self.steps.append(Step(names[0], nodes, method, args, (x.index,), (y.index,), fused=names[1:]))

    def op_quantize(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        out_q = qz.activation(op, y, ("INT8", "UINT8"))
        self.expect_shape(op, y, x.shape)
        if x.dtype == "FLOAT32":
            if y.dtype != "INT8":
                raise UnsupportedOperatorError(f"{where(op)}: float32 to {y.dtype}")
            args = dict(in_offset=x.index, out_offset=y.index, n=x.num_elements, scale=out_q.scale,
                        zero_point=out_q.zero_point)  # fmt: skip
            self.add(op, "quantize", args, [x.index], [y.index])
            return
        in_q = qz.activation(op, x, ("INT8", "UINT8"))
        # TFLite's Requantize: effective scale in double, then QuantizeMultiplier.
        (m,), (s,) = qz.multipliers(op, [in_q.scale / out_q.scale])
        lo, hi = qz.TYPE_RANGE[y.dtype]
        table = qz.requantize_table(in_q, out_q, int(m), int(s), lo, hi)
        self.lut(op, x, y, table)

    def op_dequantize(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        if y.dtype != "FLOAT32":
            raise UnsupportedOperatorError(f"{where(op, y)}: dequantize to {y.dtype}")
        in_q = qz.activation(op, x, ("INT8", "UINT8"))
        self.expect_shape(op, y, x.shape)
        args = dict(in_offset=self.activation_input(op, x), out_offset=y.index, n=x.num_elements, scale=in_q.scale,
                    zero_point=in_q.zero_point, is_unsigned=x.dtype == "UINT8")  # fmt: skip
        self.add(op, "dequantize", args, [x.index], [y.index])

    def lut(self, op: Operator, x: Tensor, y: Tensor, table: np.ndarray) -> None:
        args = dict(op=op.opcode.name, in_offset=x.index, out_offset=y.index, n=x.num_elements, table=table)
        self.add(op, "lut", args, [x.index], [y.index])

    def op_leaky_relu(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        self.expect_shape(op, y, x.shape)
        alpha = np.float32(op.options.get("alpha", 0.0))
        if not (np.isfinite(alpha) and alpha >= 0):
            raise UnsupportedOperatorError(f"{where(op)}: leaky relu alpha {float(alpha)!r}")
        # LeakyReluPrepare: s_in * alpha / s_out in float32, s_in / s_out in double.
        s_in, s_out = np.float32(in_q.scale), np.float32(out_q.scale)
        (m_alpha, m_id), (sh_alpha, sh_id) = qz.multipliers(op, [float(s_in * alpha / s_out), in_q.scale / out_q.scale])
        values = qz.byte_values(in_q) - in_q.zero_point
        mbqm = _C.multiply_by_quantized_multiplier
        positive = mbqm(values, int(m_id), int(sh_id)).astype(np.int64)
        negative = mbqm(values, int(m_alpha), int(sh_alpha)).astype(np.int64)
        out = np.clip(np.where(values >= 0, positive, negative) + out_q.zero_point, -128, 127)
        self.lut(op, x, y, qz.table_bytes(out, y.dtype))

    def op_hard_swish(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        self.expect_shape(op, y, x.shape)
        table = qz.hard_swish_table(in_q, out_q)
        if table is None:
            raise UnsupportedOperatorError(f"{where(op)}: an output scale smaller than input scale / 128")
        self.lut(op, x, y, table)

    def op_tanh(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        self.expect_shape(op, y, x.shape)
        self.lut(op, x, y, qz.float_function_table(in_q, out_q, "tanhf"))

    def softmax_output(self, op: Operator, y: Tensor) -> ActQuant:
        out_q = qz.activation(op, y)
        if out_q.zero_point != -128 or abs(out_q.scale - 1.0 / 256) > 0.001 / 256:
            raise UnsupportedOperatorError(
                f"{where(op, y)}: int8 output must have scale 1/256 and zero point -128, got {out_q.scale!r}, {out_q.zero_point}"
            )
        return out_q

    def op_logistic(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q = qz.activation(op, x)
        out_q = self.softmax_output(op, y)
        if out_q.scale != 1.0 / 256:
            raise UnsupportedOperatorError(f"{where(op, y)}: logistic output scale must be exactly 1/256")
        self.expect_shape(op, y, x.shape)
        table = _C.logistic(np.arange(-128, 128, dtype=np.int8), in_q.scale, in_q.zero_point)
        self.lut(op, x, y, np.roll(table, -128))  # index by the input's byte: 0..127, then -128..-1

    def op_softmax(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q = qz.activation(op, x)
        self.softmax_output(op, y)
        self.expect_shape(op, y, x.shape)
        beta = float(np.float32(op.options.get("beta", 1.0)))
        if not (np.isfinite(beta) and beta > 0):
            raise UnsupportedOperatorError(f"{where(op)}: softmax beta {beta!r}")
        depth = int(x.shape[-1]) if x.shape else 1
        try:
            _C.softmax_params(in_q.scale, beta)
        except ValueError as exc:
            raise UnsupportedOperatorError(f"{where(op)}: {exc}") from None
        args = dict(in_offset=x.index, out_offset=y.index, rows=x.num_elements // depth, depth=depth,
                    input_scale=in_q.scale, beta=beta)  # fmt: skip
        self.add(op, "softmax", args, [x.index], [y.index])

    def relu(self, op: Operator) -> None:
        x, y = self.tensor(op, 0), self.output(op)
        in_q, out_q = qz.activation(op, x), qz.activation(op, y)
        self.expect_shape(op, y, x.shape)
        low, high = _RELU_BOUNDS[_RELUS[op.opcode.name]]
        # TFLite's ReluPrepare / QuantizedReluX: rescale by s_in / s_out, then clamp at
        # zero_point + round(bound / s_out) (float32 division, ties away from zero).
        (m,), (s,) = qz.multipliers(op, [in_q.scale / out_q.scale])
        lo, hi = qz.TYPE_RANGE[y.dtype]

        def bound(v: float) -> int:
            return out_q.zero_point + qz.round_half_away(float(np.float32(v) / np.float32(out_q.scale)))

        act_min = max(lo, bound(low))
        act_max = hi if high is None else min(hi, bound(high))
        table = qz.requantize_table(in_q, out_q, int(m), int(s), act_min, act_max)
        self.lut(op, x, y, table)
        self.steps[-1].args["clamp"] = (act_min, act_max)

    def op_prelu(self, op: Operator) -> None:
        x, alpha, y = self.tensor(op, 0), self.tensor(op, 1), self.output(op)
        in_q, a_q, out_q = qz.activation(op, x), qz.activation(op, alpha), qz.activation(op, y)
        self.expect_shape(op, y, x.shape)
        alphas = self.constant(op, alpha, "alpha").astype(np.int32)
        channels = int(x.shape[-1]) if x.shape else 1
        lead = (1,) * (len(x.shape) - len(alpha.shape)) + tuple(alpha.shape)
        if len(alpha.shape) > len(x.shape) or any(d != 1 for d in lead[:-1]) or lead[-1] not in (1, channels):
            raise UnsupportedOperatorError(
                f"{where(op, alpha)}: alpha of shape {list(alpha.shape)} varies beyond the channels"
            )
        alphas = np.broadcast_to(alphas.reshape(-1), (channels,))
        # PreluPrepare takes both factors in float32: s_in / s_out and s_in * s_alpha / s_out.
        s_in, s_a, s_out = np.float32(in_q.scale), np.float32(a_q.scale), np.float32(out_q.scale)
        (m1, m2), (sh1, sh2) = qz.multipliers(op, [float(s_in / s_out), float(np.float32(s_in * s_a) / s_out)])
        values = np.arange(256, dtype=np.int32).astype(np.uint8).view(np.int8).astype(np.int32) - in_q.zero_point
        mbqm = _C.multiply_by_quantized_multiplier
        positive = mbqm(np.ascontiguousarray(values), int(m1), int(sh1)).astype(np.int64)
        tables = np.empty((channels, 256), np.int8)
        for c, a in enumerate(alphas):
            negative = mbqm(np.ascontiguousarray(values * (int(a) - a_q.zero_point), np.int32), int(m2), int(sh2))
            out = np.where(values >= 0, positive, negative.astype(np.int64)) + out_q.zero_point
            tables[c] = np.clip(out, -128, 127).astype(np.int8)
        if (tables == tables[0]).all():
            self.lut(op, x, y, np.ascontiguousarray(tables[0]))
            return
        args = dict(
            in_offset=x.index, out_offset=y.index, n=x.num_elements, input_zero_point=in_q.zero_point,
            output_zero_point=out_q.zero_point, positive_multiplier=int(m1), positive_shift=int(sh1),
            negative_multiplier=int(m2), negative_shift=int(sh2),
            alpha=np.ascontiguousarray(alphas - a_q.zero_point, np.int32), tables=tables,
        )  # fmt: skip
        self.add(op, "prelu", args, [x.index], [y.index])

    op_relu = relu
    op_relu6 = relu
    op_relu_n1_to_1 = relu

    # -- fusion ------------------------------------------------------------------------
    def fuse_relus(self) -> None:
        """Fold a RELU-family table step into the conv / depthwise / FC / ADD / MUL step
        before it, when it only clamps (the same scale and zero point on both sides, so the
        rescale is exactly one) and nothing else reads the producer's output."""
        readers = Counter(t for s in self.steps for t in s.reads)
        outputs = set(self.outputs)
        producer = {w: s for s in self.steps for w in s.writes}
        kept: list[Step] = []
        for step in self.steps:
            clamp = step.args.pop("clamp", None) if step.method == "lut" else None
            if not clamp:
                kept.append(step)
                continue
            src = step.reads[0]
            prev = producer.get(src)
            if (
                prev is None
                or prev.method not in _CLAMP_SLOTS
                or readers[src] != 1
                or src in outputs
                or not self._same_quantization(src, step.writes[0])
            ):
                kept.append(step)
                continue
            slots = _CLAMP_SLOTS[prev.method]
            lo, hi = _get_clamp(prev, slots)
            lo, hi = max(lo, clamp[0]), min(hi, clamp[1])
            if lo > hi:  # disjoint ranges: keep both steps
                kept.append(step)
                continue
            _set_clamp(prev, slots, lo, hi)
            prev.args["out_offset"] = step.writes[0]
            prev.writes = (step.writes[0],)
            prev.nodes += step.nodes
            prev.fused += (step.op,)
        self.steps = kept

    def fuse_add_tables(self) -> None:
        """Fold a per-channel table step of int8 values (a float PRELU's, say) into the ADD
        before it, when the ADD's operands and sum have one shape and nothing else reads the
        sum: one native step then maps the sums before they leave the cache."""
        readers = Counter(t for s in self.steps for t in s.reads)
        outputs = set(self.outputs)
        producer = {w: s for s in self.steps for w in s.writes}
        kept: list[Step] = []
        for step in self.steps:
            prev = producer.get(step.reads[0]) if step.method == "channel_lut" and "split" in step.args else None
            if (
                prev is None
                or prev.method != "add"
                or prev.args["subtract"]
                or not self._same_shape_operands(prev)
                or readers[step.reads[0]] != 1
                or step.reads[0] in outputs
            ):
                kept.append(step)
                continue
            add = prev.args
            prev.method = "add_channel_lut"
            prev.args = dict(
                op="+".join((prev.op, *prev.fused, step.op, *step.fused)), x_offset=add["x_offset"],
                y_offset=add["y_offset"], out_offset=step.args["out_offset"], n=step.args["n"], params=add["params"],
                tables=step.args["tables"], split=step.args["split"],
            )  # fmt: skip
            prev.writes = step.writes
            prev.nodes += step.nodes
            prev.fused += (step.op, *step.fused)
        self.steps = kept

    @staticmethod
    def _same_shape_operands(step: Step) -> bool:
        shape = step.args["shape"]
        contiguous = tuple(int(np.prod(shape[d + 1 :])) for d in range(4))
        return tuple(step.args["x_strides"]) == tuple(step.args["y_strides"]) == contiguous

    def _same_quantization(self, a: int, b: int) -> bool:
        qa, qb = self.tensors[a].quantization, self.tensors[b].quantization
        return qa is not None and qb is not None and (qa.scales, qa.zero_points) == (qb.scales, qb.zero_points)

    # -- memory ----------------------------------------------------------------------
    def root(self, t: int) -> int:
        while t in self.alias:
            t = self.alias[t]
        return t

    def layout(self) -> Plan:
        count = len(self.steps)
        first: dict[int, int] = {}
        last: dict[int, int] = {}

        def touch(t: int, when: int) -> None:
            r = self.root(t)
            first[r] = min(first.get(r, when), when)
            last[r] = max(last.get(r, when), when)

        for t in self.inputs:
            touch(t, -1)
        for t in self.constants:
            touch(t, -1)
            touch(t, count)
        for i, step in enumerate(self.steps):
            for t in step.reads + step.writes:
                touch(t, i)
        for t in self.outputs:
            touch(t, count)
        for t in first:
            if self.tensors[t].is_constant and t not in self.constants:
                raise UnsupportedOperatorError(f"tensor {t} {self.tensors[t].name!r}: a constant model input/output")
        sizes = {t: _align(self.tensors[t].nbytes) for t in first}
        placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
        offsets: dict[int, int] = {}
        for t in sorted(first, key=lambda t: (-sizes[t], first[t], t)):
            offset = 0
            for o, size, _, _ in sorted(p for p in placed if not (p[3] < first[t] or last[t] < p[2])):
                if offset + sizes[t] <= o:
                    break
                offset = max(offset, o + size)
            offsets[t] = offset
            placed.append((offset, sizes[t], first[t], last[t]))
        arena = max((o + s for o, s, _, _ in placed), default=0)
        if arena > MAX_ARENA_BYTES:
            raise UnsupportedOperatorError(
                f"the activations need {arena} bytes, more than the engine's {MAX_ARENA_BYTES}"
            )
        for t in list(self.alias):
            offsets[t] = offsets[self.root(t)]
        steps = [s for s in self.steps if s.method]
        return Plan(
            steps=steps,
            offsets=offsets,
            arena_bytes=max(arena, ALIGNMENT),
            inputs=self.inputs,
            outputs=self.outputs,
            tensors=self.tensors,
            constants=sorted(self.constants.items()),
        )


@dataclass(frozen=True)
class NodeSupport:
    """Whether the engine runs one operator of a model, and if not, why; ``how`` says
    when a native operator runs folded into others (a float chain's table)."""

    index: int
    op: str
    native: bool
    reason: str = ""
    how: str = ""


def node_support(model: TfliteModel) -> list[NodeSupport]:
    """Per operator of the main graph: native on the engine, or not and why. Never raises
    for a verified model. (What is not native runs on LiteRT: see `edgeinf.engine.partition`.)

    >>> [n for n in node_support(read_tflite(path)) if not n.native]     # doctest: +SKIP
    [NodeSupport(index=1, op='LOG_SOFTMAX', native=False, reason='operator 1 (LOG_SOFTMAX) is not ...')]
    """
    ops = model.main.operators
    planner = _Planner(model, operators=range(len(ops)))
    planner.find_float_islands()
    result = []
    for op in ops:
        if op.index in planner.islands:
            island, tables = planner.islands[op.index]
            nodes = ", ".join(str(o.index) for o in island.operators)
            how = f"operators {nodes} ({island.name}) run as {len(tables)} lookup table(s)"
            result.append(NodeSupport(op.index, op.opcode.name, True, how=how))
            continue
        handler = getattr(planner, "op_" + op.opcode.name.lower(), None)
        if handler is None or op.opcode.is_custom:
            result.append(
                NodeSupport(op.index, op.opcode.name, False, f"{where(op)} is not an operator the engine runs")
            )
            continue
        try:
            planner.check_tensors(sorted({t for t in (*op.inputs, *op.outputs) if t >= 0}))
            handler(op)
        except (UnsupportedOperatorError, ModelFileError) as exc:
            result.append(NodeSupport(op.index, op.opcode.name, False, str(exc)))
        else:
            result.append(NodeSupport(op.index, op.opcode.name, True))
    return result


def plan_model(model: TfliteModel) -> Plan:
    """Plan ``model`` (read and verified by `edgeinf.formats.tflite.read_tflite`) for the engine.

    Raises:
        UnsupportedOperatorError: an operator, type or parameter the engine does not run
            (LiteRT runs the model instead).
        ModelFileError: quantization or shapes TFLite itself would refuse.
    """
    return _Planner(model).plan()


def plan_part(model: TfliteModel, operators, inputs, outputs) -> Plan:
    """Plan the main graph's ``operators`` (indices, in execution order) as a model of
    their own reading the tensors ``inputs`` and giving ``outputs`` (a native segment of a
    partitioned model). Raises as `plan_model`."""
    return _Planner(model, operators, inputs, outputs).plan()
