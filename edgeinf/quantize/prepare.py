"""Fix-ups that make a float .tflite model quantizable by ai-edge-quantizer.

Models written with TFLite's older schema (MediaPipe's among them) need three edits
before the quantizer sees them, each a plain rewrite that leaves the model's
arithmetic unchanged:

- **Operator codes.** The quantizer identifies an operator by
  ``OperatorCode.builtin_code`` alone. Older files keep the real code in
  ``deprecated_builtin_code`` and leave ``builtin_code`` at 0 (ADD), which TFLite
  resolves by taking the larger of the two; the quantizer would treat every operator
  as an ADD and quantize conv filters like activations (asymmetric, which LiteRT then
  refuses). The larger of the two is written into ``builtin_code``.
- **A SignatureDef.** Calibration looks the model up by signature; one covering
  subgraph 0 is added when the model has none.
- **float16 weights.** Weights stored as float16 behind a DEQUANTIZE op are folded
  into float32 constants, so that the quantizer sees (and quantizes) real weights.

One more rewrite helps the int8 model run fast: a standalone RELU after an ADD or a
convolution becomes that operator's fused activation (the same arithmetic in float).
XNNPACK (LiteRT 2.3.0) does not take a standalone int8 RELU, and each one would split
the int8 graph into another delegate partition (18 for BlazeFace short range).
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelFileError
from ..formats.tflite_schema import schema
from ..formats.tflite_writer import pack, unpack

SIGNATURE_KEY = "serving_default"


def _name(raw) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def opcode_name(model, opcode_index: int) -> str:
    """Builtin name (or custom code) of an operator code of a schema ``ModelT``."""
    oc = model.operatorCodes[opcode_index]
    code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
    if oc.customCode:
        return _name(oc.customCode)
    names = {v: k for k, v in vars(schema().BuiltinOperator).items() if not k.startswith("_")}
    return names.get(code, f"BUILTIN_{code}")


def fix_opcodes(model) -> int:
    """Write ``max(builtin_code, deprecated_builtin_code)`` into every operator code; count the fixed."""
    fixed = 0
    for oc in model.operatorCodes:
        code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
        if oc.builtinCode != code:
            oc.builtinCode = code
            fixed += 1
    return fixed


def add_signature(model, key: str = SIGNATURE_KEY) -> bool:
    """Add a SignatureDef for subgraph 0 (names = tensor names) unless the model has one."""
    if model.signatureDefs:
        return False
    s = schema()
    sg = model.subgraphs[0]

    def tensor_map(index: int):
        m = s.TensorMapT()
        m.name = _name(sg.tensors[index].name)
        m.tensorIndex = int(index)
        return m

    sig = s.SignatureDefT()
    sig.signatureKey = key
    sig.subgraphIndex = 0
    sig.inputs = [tensor_map(i) for i in sg.inputs]
    sig.outputs = [tensor_map(i) for i in sg.outputs]
    model.signatureDefs = [sig]
    return True


def fold_float16_weights(model) -> int:
    """Replace each DEQUANTIZE of a constant float16 tensor by a float32 constant; count them."""
    types = schema().TensorType
    folded = 0
    for sg in model.subgraphs:
        keep = []
        for op in sg.operators:
            if opcode_name(model, op.opcodeIndex) == "DEQUANTIZE":
                src = sg.tensors[int(op.inputs[0])]
                data = model.buffers[src.buffer].data if src.buffer else None
                if src.type == types.FLOAT16 and data is not None and len(data):
                    values = np.frombuffer(np.asarray(data, np.uint8).tobytes(), dtype="<f2").astype(np.float32)
                    dst = sg.tensors[int(op.outputs[0])]
                    if values.size != int(np.prod(dst.shape, dtype=np.int64)):
                        raise ModelFileError(
                            f"DEQUANTIZE {_name(dst.name)!r}: {values.size} float16 values for shape {list(dst.shape)}"
                        )
                    buf = schema().BufferT()
                    buf.data = np.frombuffer(values.tobytes(), np.uint8)
                    model.buffers.append(buf)
                    dst.buffer = len(model.buffers) - 1
                    folded += 1
                    continue
            keep.append(op)
        sg.operators = keep
    return folded


_FUSIBLE = {"ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}


def fuse_relu(model) -> int:
    """Fold each RELU/RELU6 into the operator writing its input when nothing else reads it; count them."""
    s = schema()
    acts = {"RELU": s.ActivationFunctionType.RELU, "RELU6": s.ActivationFunctionType.RELU6}
    fused = 0
    for sg in model.subgraphs:
        readers: dict[int, int] = {}
        for op in sg.operators:
            for i in op.inputs:
                readers[int(i)] = readers.get(int(i), 0) + 1
        writer = {int(o): op for op in sg.operators for o in op.outputs}
        graph_outputs = {int(i) for i in sg.outputs}
        drop = set()
        for k, op in enumerate(sg.operators):
            kind = opcode_name(model, op.opcodeIndex)
            if kind not in acts:
                continue
            src = int(op.inputs[0])
            producer = writer.get(src)
            if producer is None or readers.get(src) != 1 or src in graph_outputs:
                continue
            options = producer.builtinOptions
            if opcode_name(model, producer.opcodeIndex) not in _FUSIBLE or options is None:
                continue
            if getattr(options, "fusedActivationFunction", None) != s.ActivationFunctionType.NONE:
                continue
            options.fusedActivationFunction = acts[kind]
            producer.outputs = [int(op.outputs[0])] + [int(v) for v in list(producer.outputs)[1:]]
            writer[int(op.outputs[0])] = producer
            drop.add(k)
            fused += 1
        sg.operators = [op for k, op in enumerate(sg.operators) if k not in drop]
    return fused


def drop_unused_tensors(model) -> int:
    """Remove tensors no operator, subgraph input/output or signature refers to; count them.

    A calibrator that keeps every tensor reads each one; a tensor nothing writes has no data.
    """
    dropped = 0
    for g, sg in enumerate(model.subgraphs):
        used = {int(i) for i in list(sg.inputs) + list(sg.outputs)}
        for op in sg.operators:
            used |= {int(i) for i in list(op.inputs) + list(op.outputs) + list(op.intermediates or []) if i >= 0}
        for sig in model.signatureDefs or []:
            if sig.subgraphIndex == g:
                used |= {int(m.tensorIndex) for m in list(sig.inputs or []) + list(sig.outputs or [])}
        if len(used) == len(sg.tensors):
            continue
        remap = {old: new for new, old in enumerate(sorted(used))}
        dropped += len(sg.tensors) - len(remap)

        def fix(indices, remap=remap):
            return [remap[int(i)] if i >= 0 else -1 for i in indices]

        sg.tensors = [t for i, t in enumerate(sg.tensors) if i in remap]
        sg.inputs, sg.outputs = fix(sg.inputs), fix(sg.outputs)
        for op in sg.operators:
            op.inputs, op.outputs = fix(op.inputs), fix(op.outputs)
            if op.intermediates is not None and len(op.intermediates):
                op.intermediates = fix(op.intermediates)
        for sig in model.signatureDefs or []:
            if sig.subgraphIndex == g:
                for m in list(sig.inputs or []) + list(sig.outputs or []):
                    m.tensorIndex = remap[int(m.tensorIndex)]
    return dropped


def drop_unused_opcodes(model) -> int:
    """Remove operator codes no operator uses (a folded DEQUANTIZE, a fused RELU); count them.

    A runtime registers a kernel for every code in the table, used or not."""
    used = sorted({int(op.opcodeIndex) for sg in model.subgraphs for op in sg.operators})
    if len(used) == len(model.operatorCodes):
        return 0
    remap = {old: new for new, old in enumerate(used)}
    dropped = len(model.operatorCodes) - len(used)
    model.operatorCodes = [model.operatorCodes[i] for i in used]
    for sg in model.subgraphs:
        for op in sg.operators:
            op.opcodeIndex = remap[int(op.opcodeIndex)]
    return dropped


def prepare(data: bytes) -> tuple[bytes, dict[str, int]]:
    """The model's bytes with the fix-ups and the RELU fusion applied, and what each changed."""
    model = unpack(data)
    changes = {
        "opcodes_fixed": fix_opcodes(model),
        "signature_added": int(add_signature(model)),
        "float16_folded": fold_float16_weights(model),
        "relu_fused": fuse_relu(model),
    }
    drop_unused_tensors(model)
    drop_unused_opcodes(model)
    return pack(model), changes
