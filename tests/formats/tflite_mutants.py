"""Structured mutants of a real .tflite model: one broken rule each (shared by the reader and
runtime tests)."""

from __future__ import annotations

import random

from edgeinf.formats.tflite_ops import OPERATORS
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import builtin_code, pack


def _code(model, op) -> int:
    oc = model.operatorCodes[op.opcodeIndex]
    return max(oc.builtinCode, oc.deprecatedBuiltinCode)


def _first(model, name: str) -> int:
    ops = model.subgraphs[0].operators
    return next(j for j, op in enumerate(ops) if _code(model, op) == builtin_code(name))


def _add_opcode(model, name: str) -> int:
    oc = schema().OperatorCodeT()
    oc.builtinCode = builtin_code(name)
    oc.deprecatedBuiltinCode = min(builtin_code(name), 127)
    oc.version = 1
    model.operatorCodes.append(oc)
    return len(model.operatorCodes) - 1


def split_with_one_input(m):
    """A RELU node pointed at a SPLIT opcode: one input, no options (XNNPACK segfaults)."""
    op = m.subgraphs[0].operators[_first(m, "RELU")]
    op.opcodeIndex = _add_opcode(m, "SPLIT")
    op.builtinOptions, op.builtinOptionsType = None, 0


def conv_with_zero_stride(m):
    m.subgraphs[0].operators[_first(m, "CONV_2D")].builtinOptions.strideW = 0


def conv_with_pool_options(m):
    op = m.subgraphs[0].operators[_first(m, "CONV_2D")]
    pool = schema().Pool2DOptionsT()
    pool.strideW = pool.strideH = pool.filterWidth = pool.filterHeight = 1
    op.builtinOptions, op.builtinOptionsType = pool, schema().BuiltinOptions.Pool2DOptions


def concatenation_axis_out_of_range(m):
    m.subgraphs[0].operators[_first(m, "CONCATENATION")].builtinOptions.axis = 7


def conv_without_filter(m):
    op = m.subgraphs[0].operators[_first(m, "CONV_2D")]
    op.inputs = [int(op.inputs[0]), -1, int(op.inputs[2])]


def concatenation_with_an_absent_input(m):
    """A -1 among CONCATENATION's inputs (LiteRT segfaults)."""
    op = m.subgraphs[0].operators[_first(m, "CONCATENATION")]
    op.inputs = [int(v) for v in op.inputs] + [-1]


def depthwise_without_bias(m):
    """Two inputs: LiteRT and tflite-runtime 2.14 segfault, with XNNPACK or without."""
    op = m.subgraphs[0].operators[_first(m, "DEPTHWISE_CONV_2D")]
    op.inputs = [int(v) for v in op.inputs][:2]


def op_writes_graph_input(m):
    sg = m.subgraphs[0]
    sg.operators[3].outputs = [int(sg.inputs[0])]


def op_writes_constant(m):
    sg = m.subgraphs[0]
    sg.operators[3].outputs = [int(sg.operators[0].inputs[0])]  # fp16 weights with data in the file


def two_ops_write_one_tensor(m):
    sg = m.subgraphs[0]
    sg.operators[5].outputs = [int(sg.operators[4].outputs[0])]


def ops_out_of_order(m):
    sg = m.subgraphs[0]
    conv = _first(m, "CONV_2D")  # the first CONV_2D feeds the next operator
    sg.operators[conv], sg.operators[conv + 1] = sg.operators[conv + 1], sg.operators[conv]


def output_never_written(m):
    sg = m.subgraphs[0]
    t = schema().TensorT()
    t.name, t.shape, t.type, t.buffer = "orphan", [1, 4], 0, 0
    sg.tensors.append(t)
    sg.outputs = [int(v) for v in sg.outputs] + [len(sg.tensors) - 1]


MUTANTS = {
    "split_with_one_input": (split_with_one_input, r"operator 3 \(SPLIT\): 1 inputs, expected 2"),
    "conv_with_zero_stride": (conv_with_zero_stride, r"operator 2 \(CONV_2D\): stride_w is 0, must be >= 1"),
    "conv_with_pool_options": (
        conv_with_pool_options,
        r"operator 2 \(CONV_2D\): its builtin options are Pool2DOptions, expected Conv2DOptions",
    ),
    "concatenation_axis_out_of_range": (
        concatenation_axis_out_of_range,
        r"\(CONCATENATION\): axis 7 is out of range for input 0 of rank 3",
    ),
    "conv_without_filter": (conv_without_filter, r"operator 2 \(CONV_2D\): required input 1 is absent"),
    "concatenation_with_an_absent_input": (
        concatenation_with_an_absent_input,
        r"\(CONCATENATION\): required input 2 is absent",
    ),
    "depthwise_without_bias": (depthwise_without_bias, r"\(DEPTHWISE_CONV_2D\): 2 inputs, expected 3"),
    "op_writes_graph_input": (
        op_writes_graph_input,
        r"operator 3 \(RELU\) writes tensor 0 'input', one of the graph's inputs",
    ),
    "op_writes_constant": (
        op_writes_constant,
        r"operator 3 \(RELU\) writes tensor \d+ .*, a constant \(\d+ bytes in the file\)",
    ),
    "two_ops_write_one_tensor": (
        two_ops_write_one_tensor,
        r"operator 5 \(\w+\) writes tensor \d+ .*, which operator 4 \(\w+\) writes too",
    ),
    "ops_out_of_order": (
        ops_out_of_order,
        r"operator 2 \(RELU\) reads tensor \d+ .* before operator 3 \(CONV_2D\) writes it",
    ),
    "output_never_written": (output_never_written, r"graph output tensor \d+ 'orphan' is written by no operator"),
}


def mutate(data: bytes, name: str) -> bytes:
    model = schema().ModelT.InitFromPackedBuf(bytearray(data), 0)
    MUTANTS[name][0](model)
    return pack(model)


_ODD_VALUES = (0, -1, 2, 7, 1000, -(2**31))


def random_mutant(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One random structural edit of one node: its opcode (any operator edgeinf lists), an
    input added, dropped or made absent, an output added, an option set to an odd value,
    its inputs shuffled, or a dimension of one of its activations changed."""
    model = schema().ModelT.InitFromPackedBuf(bytearray(data), 0)
    sg = model.subgraphs[0]
    j = rng.randrange(len(sg.operators))
    op = sg.operators[j]
    kind = rng.choice(["opcode", "inputs", "outputs", "options", "shuffle", "shape"])
    if kind == "opcode":
        op.opcodeIndex = _add_opcode(model, rng.choice(sorted(OPERATORS)))
        if rng.random() < 0.5:
            op.builtinOptions, op.builtinOptionsType = None, 0
    elif kind == "inputs":
        ins = [int(v) for v in op.inputs]
        if ins and rng.random() < 0.5:
            ins.pop(rng.randrange(len(ins)))
        else:
            ins.append(rng.choice([-1, rng.randrange(len(sg.tensors))]))
        op.inputs = ins
    elif kind == "outputs":
        t = schema().TensorT()
        t.name, t.shape, t.type, t.buffer = "extra", [1, 4], 0, 0
        sg.tensors.append(t)
        op.outputs = [int(v) for v in op.outputs] + [len(sg.tensors) - 1]
    elif kind == "options" and op.builtinOptions is not None:
        fields = [k for k, v in vars(op.builtinOptions).items() if isinstance(v, int) and not isinstance(v, bool)]
        if fields:
            setattr(op.builtinOptions, rng.choice(fields), rng.choice(_ODD_VALUES))
    elif kind == "shuffle":
        ins = [int(v) for v in op.inputs]
        rng.shuffle(ins)
        op.inputs = ins
    elif kind == "shape":
        candidates = [int(v) for v in list(op.inputs) + list(op.outputs) if v >= 0 and sg.tensors[int(v)].buffer == 0]
        if candidates:
            t = sg.tensors[rng.choice(candidates)]
            if t.shape is not None and len(t.shape):
                shape = [int(d) for d in t.shape]
                shape[rng.randrange(len(shape))] = rng.choice([0, 1, 3, 1000])
                t.shape = shape
    try:
        return f"{kind} of operator {j}", pack(model)
    except TypeError:  # a value the field's type cannot hold (an int8 enum set to 1000)
        return f"{kind} of operator {j} (not written)", data
