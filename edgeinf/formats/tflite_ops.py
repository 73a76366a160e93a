"""What each TFLite operator's kernel requires of a node, as data, checked before any runtime sees it.

The runtimes check some of this in each kernel's Prepare, but not all of it, not in
every version, and XNNPACK's delegate reads a node before the kernel does: a SPLIT with
one input and no options segfaults in ``load()``. So every node of an operator listed
here must have the input and output counts, the builtin options type and the option
values its kernel's Prepare (LiteRT ``tflite/kernels/*.cc``) requires; options absent
from the file hold the schema's defaults, as the runtime's parser gives them.

Each entry: inputs (min, max; None = any number), outputs (min, max), the options table
(a ``BuiltinOptions`` member; None: the kernel reads none), value rules, and the input
positions that may be absent (-1); every other input must be present. Where a runtime
crashes on what its kernel's code allows, the entry follows the runtime: CONV_2D and
DEPTHWISE_CONV_2D need their bias (LiteRT 2.3 and tflite-runtime 2.14 fail or segfault
without it). Operators not listed are left to the runtime.

>>> OPERATORS["SPLIT"].inputs, OPERATORS["SPLIT"].options
((2, 2), 'SplitOptions')
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..errors import ModelFileError
from ._flatbuf import load_layout

if TYPE_CHECKING:
    from .tflite import Operator, Subgraph, TfliteModel


@dataclass(frozen=True)
class _Node:
    """What a rule sees: the model, its subgraph, the operator and its options with defaults."""

    model: TfliteModel
    sg: Subgraph
    op: Operator
    options: dict

    def rank(self, k: int) -> int | None:
        """Rank of input k, None if absent or unknown."""
        if k >= len(self.op.inputs) or self.op.inputs[k] < 0:
            return None
        t = self.sg.tensors[self.op.inputs[k]]
        return len(t.shape) if t.shape or t.has_rank else None

    def constant(self, k: int) -> np.ndarray | None:
        if k >= len(self.op.inputs) or self.op.inputs[k] < 0:
            return None
        return self.model.tensor_data(self.sg.index, self.op.inputs[k])


Rule = Callable[[_Node], "str | None"]


def at_least(field: str, low: int) -> Rule:
    return lambda n: None if n.options.get(field, 0) >= low else f"{field} is {n.options.get(field)}, must be >= {low}"


def enum(field: str, enum_name: str) -> Rule:
    values = set(load_layout("tflite_layout")["enums"][enum_name].values())
    return lambda n: None if n.options.get(field, 0) in values else f"{field} {n.options.get(field)} is no {enum_name}"


def equals_count(field: str, of: str) -> Rule:
    """An option that must equal the node's number of ``of`` (``"inputs"`` or ``"outputs"``)."""

    def rule(n: _Node) -> str | None:
        count = len(getattr(n.op, of))
        if n.options.get(field, 0) != count:
            return f"{field} is {n.options.get(field)} but the node has {count} {of}"
        return None

    return rule


def axis_option(field: str, of_input: int, extra: int = 0) -> Rule:
    """An axis option within the rank of an input (``extra`` = 1 where a new axis may be appended)."""

    def rule(n: _Node) -> str | None:
        rank = n.rank(of_input)
        axis = n.options.get(field, 0)
        if rank is None:
            return None
        limit = rank + extra
        if not -limit <= axis < max(limit, 1):
            return f"{field} {axis} is out of range for input {of_input} of rank {rank}"
        return None

    return rule


def constant_axis(k: int, of_input: int) -> Rule:
    """A constant scalar axis tensor (input k) within the rank of another input."""

    def rule(n: _Node) -> str | None:
        data, rank = n.constant(k), n.rank(of_input)
        if data is None or rank is None:
            return None
        if data.size != 1:
            return f"the axis (input {k}) holds {data.size} values, expected 1"
        axis = int(data.reshape(-1)[0])
        if not -rank <= axis < rank:
            return f"the axis (input {k}) is {axis}, out of range for input {of_input} of rank {rank}"
        return None

    return rule


def constant_nonzero(k: int, what: str) -> Rule:
    def rule(n: _Node) -> str | None:
        data = n.constant(k)
        if data is not None and data.size and not np.all(data != 0):
            return f"the {what} (input {k}) {data.reshape(-1).tolist()[:8]} has a zero"
        return None

    return rule


def rank_of(k: int, *ranks: int) -> Rule:
    def rule(n: _Node) -> str | None:
        rank = n.rank(k)
        if rank is not None and rank not in ranks:
            return f"input {k} has rank {rank}, expected {' or '.join(map(str, ranks))}"
        return None

    return rule


def positive_dims(k: int, what: str) -> Rule:
    """A weights tensor whose every dimension is positive (kernels divide by them)."""

    def rule(n: _Node) -> str | None:
        if k < len(n.op.inputs) and n.op.inputs[k] >= 0:
            shape = n.sg.tensors[n.op.inputs[k]].shape
            if any(d <= 0 for d in shape):
                return f"the {what} (input {k}) has shape {list(shape)}, every dimension must be positive"
        return None

    return rule


def subgraph_index(field: str) -> Rule:
    def rule(n: _Node) -> str | None:
        index = n.options.get(field, 0)
        if not 0 <= index < len(n.model.subgraphs) or index == n.sg.index:
            return f"{field} {index} names no other subgraph (the model has {len(n.model.subgraphs)})"
        return None

    return rule


@dataclass(frozen=True)
class OpSpec:
    """One operator's node requirements (see the module docstring)."""

    inputs: tuple[int, int | None]
    outputs: tuple[int, int | None]
    options: str | None = None
    rules: tuple[Rule, ...] = ()
    optional: tuple[int, ...] = ()


def _op(ins, outs=1, options=None, *rules: Rule, optional: tuple[int, ...] = ()) -> OpSpec:
    ins = ins if isinstance(ins, tuple) else (ins, ins)
    outs = outs if isinstance(outs, tuple) else (outs, outs)
    return OpSpec(ins, outs, options, rules, optional)


_ACT = enum("fused_activation_function", "ActivationFunctionType")
_PADDING = enum("padding", "Padding")
_STRIDES = (at_least("stride_w", 1), at_least("stride_h", 1))
_DILATIONS = (at_least("dilation_w_factor", 1), at_least("dilation_h_factor", 1))
_CONV = (_PADDING, _ACT, *_STRIDES, rank_of(0, 4), rank_of(1, 4), positive_dims(1, "filter"))
_POOL = (_PADDING, _ACT, *_STRIDES, at_least("filter_width", 1), at_least("filter_height", 1), rank_of(0, 4))
_REDUCE = _op(2, 1, "ReducerOptions")

OPERATORS: dict[str, OpSpec] = {
    # arithmetic with a fused activation
    "ADD": _op(2, 1, "AddOptions", _ACT),
    "SUB": _op(2, 1, "SubOptions", _ACT),
    "MUL": _op(2, 1, "MulOptions", _ACT),
    "DIV": _op(2, 1, "DivOptions", _ACT),
    "ADD_N": _op((2, None), 1, "AddNOptions"),
    # other binary elementwise ops
    "MAXIMUM": _op(2, 1, "MaximumMinimumOptions"),
    "MINIMUM": _op(2, 1, "MaximumMinimumOptions"),
    "SQUARED_DIFFERENCE": _op(2, 1, "SquaredDifferenceOptions"),
    "POW": _op(2, 1, "PowOptions"),
    "FLOOR_DIV": _op(2, 1, "FloorDivOptions"),
    "FLOOR_MOD": _op(2, 1, "FloorModOptions"),
    "ATAN2": _op(2, 1, "ATan2Options"),
    "LESS": _op(2, 1, "LessOptions"),
    "LESS_EQUAL": _op(2, 1, "LessEqualOptions"),
    "GREATER": _op(2, 1, "GreaterOptions"),
    "GREATER_EQUAL": _op(2, 1, "GreaterEqualOptions"),
    "EQUAL": _op(2, 1, "EqualOptions"),
    "NOT_EQUAL": _op(2, 1, "NotEqualOptions"),
    "LOGICAL_AND": _op(2, 1, "LogicalAndOptions"),
    "LOGICAL_OR": _op(2, 1, "LogicalOrOptions"),
    "PRELU": _op(2, 1),
    # unary ops
    **{
        name: _op(1, 1)
        for name in (
            "RELU",
            "RELU6",
            "RELU_N1_TO_1",
            "RELU_0_TO_1",
            "LOGISTIC",
            "TANH",
            "ELU",
            "HARD_SWISH",
            "LOG",
            "SQRT",
            "RSQRT",
            "SIN",
            "FLOOR",
            "CEIL",
            "DENSIFY",
            "SHAPE",
            "RANK",
            "WHERE",
            "ZEROS_LIKE",
        )
    },  # fmt: skip
    "EXP": _op(1, 1, "ExpOptions"),
    "COS": _op(1, 1, "CosOptions"),
    "SQUARE": _op(1, 1, "SquareOptions"),
    "ABS": _op(1, 1, "AbsOptions"),
    "NEG": _op(1, 1, "NegOptions"),
    "ROUND": _op(1, 1),
    "SIGN": _op(1, 1, "SignOptions"),
    "LOGICAL_NOT": _op(1, 1, "LogicalNotOptions"),
    "CAST": _op(1, 1, "CastOptions"),
    "DEQUANTIZE": _op(1, 1, "DequantizeOptions"),
    "QUANTIZE": _op(1, 1, "QuantizeOptions"),
    "LEAKY_RELU": _op(1, 1, "LeakyReluOptions"),
    "GELU": _op(1, 1, "GeluOptions"),
    "SOFTMAX": _op(1, 1, "SoftmaxOptions"),
    "LOG_SOFTMAX": _op(1, 1, "LogSoftmaxOptions"),
    "L2_NORMALIZATION": _op(1, 1, "L2NormOptions", _ACT),
    "LOCAL_RESPONSE_NORMALIZATION": _op(1, 1, "LocalResponseNormalizationOptions"),
    # convolutions, pooling, dense
    "CONV_2D": _op(3, 1, "Conv2DOptions", *_CONV, *_DILATIONS),
    "DEPTHWISE_CONV_2D": _op(3, 1, "DepthwiseConv2DOptions", *_CONV, *_DILATIONS),
    "TRANSPOSE_CONV": _op(
        (3, 4), 1, "TransposeConvOptions", _PADDING, *_STRIDES, rank_of(1, 4), rank_of(2, 4), optional=(3,)
    ),
    "CONV_3D": _op((2, 3), 1, "Conv3DOptions", _PADDING, *_STRIDES, at_least("stride_d", 1), optional=(2,)),
    "FULLY_CONNECTED": _op((2, 3), (1, 2), "FullyConnectedOptions", _ACT, positive_dims(1, "weights"), optional=(2,)),
    "BATCH_MATMUL": _op(2, 1, "BatchMatMulOptions"),
    "AVERAGE_POOL_2D": _op(1, 1, "Pool2DOptions", *_POOL),
    "MAX_POOL_2D": _op(1, 1, "Pool2DOptions", *_POOL),
    "L2_POOL_2D": _op(1, 1, "Pool2DOptions", *_POOL),
    # reductions
    "MEAN": _REDUCE,
    "SUM": _REDUCE,
    "REDUCE_MAX": _REDUCE,
    "REDUCE_MIN": _REDUCE,
    "REDUCE_PROD": _REDUCE,
    "REDUCE_ANY": _REDUCE,
    "REDUCE_ALL": _REDUCE,
    "ARG_MAX": _op(2, 1, "ArgMaxOptions"),
    "ARG_MIN": _op(2, 1, "ArgMinOptions"),
    "TOPK_V2": _op(2, 2, "TopKV2Options"),
    "CUMSUM": _op(2, 1, "CumsumOptions"),
    # shape and layout
    "RESHAPE": _op((1, 2), 1, "ReshapeOptions", optional=(1,)),
    "SQUEEZE": _op(1, 1, "SqueezeOptions"),
    "EXPAND_DIMS": _op(2, 1, "ExpandDimsOptions"),
    "TRANSPOSE": _op(2, 1, "TransposeOptions"),
    "CONCATENATION": _op((1, None), 1, "ConcatenationOptions", _ACT, axis_option("axis", 0)),
    "PACK": _op(
        (1, None),
        1,
        "PackOptions",
        equals_count("values_count", "inputs"),
        at_least("values_count", 1),
        axis_option("axis", 0, 1),
    ),
    "UNPACK": _op(
        1, (1, None), "UnpackOptions", equals_count("num", "outputs"), at_least("num", 1), axis_option("axis", 0)
    ),
    "SPLIT": _op(
        2,
        (1, None),
        "SplitOptions",
        at_least("num_splits", 1),
        equals_count("num_splits", "outputs"),
        constant_axis(0, 1),
    ),
    "SPLIT_V": _op(
        3,
        (1, None),
        "SplitVOptions",
        at_least("num_splits", 1),
        equals_count("num_splits", "outputs"),
        constant_axis(2, 0),
    ),
    "SLICE": _op(3, 1, "SliceOptions"),
    "STRIDED_SLICE": _op(4, 1, "StridedSliceOptions", constant_nonzero(3, "strides")),
    "GATHER": _op(2, 1, "GatherOptions", axis_option("axis", 0)),
    "GATHER_ND": _op(2, 1, "GatherNdOptions"),
    "SCATTER_ND": _op(3, 1, "ScatterNdOptions"),
    "TILE": _op(2, 1, "TileOptions"),
    "BROADCAST_TO": _op(2, 1, "BroadcastToOptions"),
    "REVERSE_V2": _op(2, 1, "ReverseV2Options"),
    "PAD": _op((2, 3), 1, "PadOptions", optional=(2,)),
    "PADV2": _op((2, 3), 1, "PadV2Options", optional=(2,)),
    "MIRROR_PAD": _op(2, 1, "MirrorPadOptions"),
    "DEPTH_TO_SPACE": _op(1, 1, "DepthToSpaceOptions", at_least("block_size", 1), rank_of(0, 4)),
    "SPACE_TO_DEPTH": _op(1, 1, "SpaceToDepthOptions", at_least("block_size", 1), rank_of(0, 4)),
    "SPACE_TO_BATCH_ND": _op(3, 1, "SpaceToBatchNDOptions"),
    "BATCH_TO_SPACE_ND": _op(3, 1, "BatchToSpaceNDOptions"),
    "RESIZE_BILINEAR": _op(2, 1, "ResizeBilinearOptions", rank_of(0, 4), rank_of(1, 1)),
    "RESIZE_NEAREST_NEIGHBOR": _op(2, 1, "ResizeNearestNeighborOptions", rank_of(0, 4), rank_of(1, 1)),
    # selection and generation
    "SELECT": _op(3, 1, "SelectOptions"),
    "SELECT_V2": _op(3, 1, "SelectV2Options"),
    "FILL": _op(2, 1, "FillOptions"),
    "RANGE": _op(3, 1, "RangeOptions"),
    "ONE_HOT": _op(4, 1, "OneHotOptions"),
    "UNIQUE": _op(1, 2, "UniqueOptions"),
    "EMBEDDING_LOOKUP": _op(2, 1),
    "NON_MAX_SUPPRESSION_V4": _op(5, 2, "NonMaxSuppressionV4Options"),
    "NON_MAX_SUPPRESSION_V5": _op(6, 3, "NonMaxSuppressionV5Options"),
    # control flow: the subgraphs they call must exist
    "IF": _op(
        (1, None), (0, None), "IfOptions", subgraph_index("then_subgraph_index"), subgraph_index("else_subgraph_index")
    ),
    "WHILE": _op(
        (0, None),
        (0, None),
        "WhileOptions",
        subgraph_index("cond_subgraph_index"),
        subgraph_index("body_subgraph_index"),
    ),
    "CALL_ONCE": _op(0, 0, "CallOnceOptions", subgraph_index("init_subgraph_index")),
}

# Custom operators the runtimes register (their Prepare crashed on nodes of another shape).
CUSTOM_OPERATORS: dict[str, OpSpec] = {
    "TFLite_Detection_PostProcess": _op(3, 4),
}


@cache
def _defaults(table: str) -> dict:
    fields = load_layout("tflite_layout")["tables"][table]
    return {name: f["default"] for name, f in fields.items() if f["kind"] == "scalar"}


def _count_error(what: str, n: int, low: int, high: int | None) -> str | None:
    if n < low or (high is not None and n > high):
        expected = str(low) if low == high else (f"{low} or more" if high is None else f"{low}..{high}")
        return f"{n} {what}, expected {expected}"
    return None


def check_operators(model, what: str) -> None:
    """Check every node of a listed operator against its `OpSpec`.

    Raises:
        ModelFileError: naming the subgraph, the node, the operator and what its kernel needs.
    """
    for sg in model.subgraphs:
        for op in sg.operators:
            oc = op.opcode
            spec = CUSTOM_OPERATORS.get(oc.custom_code or "") if oc.is_custom else OPERATORS.get(oc.name)
            problem = None if spec is None else _node_problem(model, sg, op, spec)
            if problem is not None:
                name = oc.custom_code if oc.is_custom else oc.name
                raise ModelFileError(f"{what}: subgraph {sg.index} operator {op.index} ({name}): {problem}")


def _node_problem(model, sg, op, spec: OpSpec) -> str | None:
    problem = _count_error("inputs", len(op.inputs), *spec.inputs) or _count_error(
        "outputs", len(op.outputs), *spec.outputs
    )
    if problem:
        return problem
    absent = next((k for k, t in enumerate(op.inputs) if t < 0 and k not in spec.optional), None)
    if absent is not None:
        return f"required input {absent} is absent (-1)"
    if spec.options is not None and op.options_type not in (None, spec.options):
        return f"its builtin options are {op.options_type}, expected {spec.options}"
    if not spec.rules:
        return None
    options = {**(_defaults(spec.options) if spec.options else {}), **op.options}
    node = _Node(model, sg, op, options)
    return next((p for p in (rule(node) for rule in spec.rules) if p), None)
