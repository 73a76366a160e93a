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
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelFileError
from ..formats.tflite_schema import schema
from ..formats.tflite_writer import pack, unpack

SIGNATURE_KEY = "serving_default"


def _name(raw) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def unpack_inline(data: bytes):
    """`unpack`, with buffers stored after the flatbuffer (``offset``/``size``, as
    ai-edge-quantizer writes them) read back into the model so that it can be packed again."""
    model = unpack(data)
    for i, buf in enumerate(model.buffers or []):
        if getattr(buf, "offset", 0) > 1:
            end = buf.offset + buf.size
            if end > len(data):
                raise ModelFileError(
                    f"buffer {i} lies at bytes {buf.offset}..{end}, past the end of the file ({len(data)})"
                )
            buf.data = np.frombuffer(data[buf.offset : end], np.uint8)
            buf.offset = buf.size = 0
    return model


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


def prepare(data: bytes) -> tuple[bytes, dict[str, int]]:
    """The model's bytes with all three fix-ups applied, and what each changed."""
    model = unpack_inline(data)
    changes = {
        "opcodes_fixed": fix_opcodes(model),
        "signature_added": int(add_signature(model)),
        "float16_folded": fold_float16_weights(model),
    }
    return pack(model), changes
