"""Structured mutants of a real .tflite model: one broken rule each (shared by the reader and
runtime tests)."""

from __future__ import annotations

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
