"""Activation range equalization: rescale channels that would set a whole tensor's int8 scale.

int8 activations have one scale per tensor. When one channel of a convolution's output
spans a range many times wider than the others (BlazeFace short range has a depthwise
channel reaching -442 where the others stay within ±13), that channel sets the scale and
every other channel keeps only a few int8 steps.

When the tensor goes from one convolution straight into another (nothing else reads it,
and the first one's activation is NONE or RELU, which commute with a positive scale), the
float model is unchanged by dividing channel ``c`` of the first convolution's weights and
bias by ``k_c`` and multiplying the second convolution's weights for input channel ``c``
by ``k_c``. Choosing ``k_c`` from the calibrated per-channel ranges brings every channel
within the typical range of its tensor, so the int8 scale fits them all. A rescaled
tensor is renamed ``<name>/equalized``. (Cross-layer
equalization, as in Nagel et al., "Data-Free Quantization Through Weight Equalization
and Bias Correction", 2019, with activation ranges as the criterion.)
"""

from __future__ import annotations

import numpy as np

from ..formats.tflite_schema import schema
from ..formats.tflite_writer import pack, unpack
from .prepare import opcode_name

TYPICAL_PERCENTILE = 90  # channels are brought down to the 90th percentile of their tensor's channel ranges
MIN_GAIN = 4.0  # pairs whose widest channel is less than this over the typical range are left alone


def _name(raw) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def linear_pairs(model) -> list[tuple[int, int]]:
    """(producer, consumer) operator indices of convolution pairs that can be rescaled exactly."""
    s = schema()
    sg = model.subgraphs[0]
    readers: dict[int, list[int]] = {}
    for j, op in enumerate(sg.operators):
        for i in op.inputs:
            readers.setdefault(int(i), []).append(j)
    outputs = {int(i) for i in sg.outputs}
    allowed = {s.ActivationFunctionType.NONE, s.ActivationFunctionType.RELU}
    pairs = []
    for j, op in enumerate(sg.operators):
        kind = opcode_name(model, op.opcodeIndex)
        if kind not in ("CONV_2D", "DEPTHWISE_CONV_2D") or len(op.inputs) < 3 or op.inputs[2] < 0:
            continue
        if op.builtinOptions is None or op.builtinOptions.fusedActivationFunction not in allowed:
            continue
        if kind == "DEPTHWISE_CONV_2D" and op.builtinOptions.depthMultiplier not in (0, 1):
            continue
        out = int(op.outputs[0])
        users = readers.get(out, [])
        if out in outputs or len(users) != 1:
            continue
        consumer = sg.operators[users[0]]
        if opcode_name(model, consumer.opcodeIndex) != "CONV_2D" or int(consumer.inputs[0]) != out:
            continue
        pairs.append((j, users[0]))
    return pairs


def candidate_tensors(data: bytes) -> list[str]:
    """Names of the tensors between rescalable pairs: their per-channel ranges are needed."""
    model = unpack(data)
    sg = model.subgraphs[0]
    return [_name(sg.tensors[int(sg.operators[p].outputs[0])].name) for p, _ in linear_pairs(model)]


def _weights(model, sg, tensor_index: int) -> np.ndarray:
    t = sg.tensors[tensor_index]
    if t.type != schema().TensorType.FLOAT32 or not t.buffer:
        raise ValueError("not a float32 constant")
    raw = np.asarray(model.buffers[t.buffer].data, np.uint8).tobytes()
    return np.frombuffer(raw, "<f4").reshape(tuple(int(d) for d in t.shape)).copy()


def _store(model, sg, tensor_index: int, values: np.ndarray) -> None:
    # A fresh buffer: a buffer shared with another tensor must not change under it.
    buf = schema().BufferT()
    buf.data = np.frombuffer(values.astype("<f4").tobytes(), np.uint8)
    model.buffers.append(buf)
    sg.tensors[tensor_index].buffer = len(model.buffers) - 1


def equalize(data: bytes, channel_max_abs: dict[str, np.ndarray]) -> tuple[bytes, dict[str, float]]:
    """Rescale the channels of each rescalable pair whose tensor has a channel far wider than typical.

    Args:
        data: a prepared float model (float32 weights).
        channel_max_abs: tensor name -> per-channel max |x| over the calibration samples.

    Returns:
        The rewritten model and, per rescaled tensor, how much narrower its widest channel became.
    """
    model = unpack(data)
    sg = model.subgraphs[0]
    changed = {}
    for p, c in linear_pairs(model):
        producer, consumer = sg.operators[p], sg.operators[c]
        name = _name(sg.tensors[int(producer.outputs[0])].name)
        ranges = channel_max_abs.get(name)
        if ranges is None:
            continue
        ranges = np.asarray(ranges, np.float64)
        typical = float(np.percentile(ranges, TYPICAL_PERCENTILE))
        if typical <= 0 or ranges.max() < MIN_GAIN * typical:
            continue
        k = np.maximum(1.0, ranges / typical)
        try:
            w1 = _weights(model, sg, int(producer.inputs[1]))
            b1 = _weights(model, sg, int(producer.inputs[2]))
            w2 = _weights(model, sg, int(consumer.inputs[1]))
        except ValueError:
            continue
        if opcode_name(model, producer.opcodeIndex) == "CONV_2D":
            w1 = w1 / k.reshape(-1, 1, 1, 1)
        else:
            w1 = w1 / k.reshape(1, 1, 1, -1)
        if w2.shape[-1] != k.size or b1.size != k.size:
            continue
        _store(model, sg, int(producer.inputs[1]), w1)
        _store(model, sg, int(producer.inputs[2]), b1 / k)
        _store(model, sg, int(consumer.inputs[1]), w2 * k.reshape(1, 1, 1, -1))
        # The tensor now holds rescaled channels: a new name keeps any comparison by name
        # with the float model (the accuracy report) from matching it with the original.
        sg.tensors[int(producer.outputs[0])].name = f"{name}/equalized"
        changed[name] = float(ranges.max() / (ranges / k).max())
    return pack(model), changed


def channel_ranges(data: bytes, tensor_names: list[str], samples) -> dict[str, np.ndarray]:
    """Per-channel max |x| of the named tensors over ``samples`` (input 0 tensors), on the float model."""
    if not tensor_names:
        return {}
    from .report import _interpreter

    it = _interpreter(data)
    index = {d["name"]: d["index"] for d in it.get_tensor_details()}
    wanted = [n for n in tensor_names if n in index]
    ranges: dict[str, np.ndarray] = {}
    feed = it.get_input_details()[0]["index"]
    for x in samples:
        it.set_tensor(feed, np.asarray(x, np.float32))
        it.invoke()
        for n in wanted:
            v = np.abs(it.get_tensor(index[n]))
            m = v.reshape(-1, v.shape[-1]).max(axis=0)
            ranges[n] = m if n not in ranges else np.maximum(ranges[n], m)
    return ranges
