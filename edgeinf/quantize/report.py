"""The accuracy an int8 model kept: per output, per layer and on the task.

Both models run on LiteRT's built-in kernels with every intermediate tensor kept
(``experimental_preserve_all_tensors``; a delegate would fuse them away). Each int8
tensor is dequantized and compared with the float tensor of the same name.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, ModelFileError

WORST = 5  # layers named in the summary
FEW_LEVELS = 32  # an output spanning fewer int8 steps than this over its range has lost its resolution
OUTLIER_RATIO = 16.0  # quantized range this many times the 99.9th percentile of |x|: outliers set the scale
CHANNEL_SPREAD = 8.0  # one channel this many times wider than the typical one sets the scale of all


@dataclass(frozen=True)
class TensorError:
    """How far one dequantized int8 tensor is from the float one, over the held-aside images.

    Attributes:
        name: tensor name; op: ``"CONV_2D (node 3)"``, the operator that writes it.
        max_abs, mean_abs: absolute error; cosine: cosine similarity of all values.
        float_min, float_max: the float tensor's observed range.
        scale, zero_point: the int8 tensor's quantization.
        levels: int8 steps across the observed float range.
        distinct_int8, distinct_float: distinct values seen (outputs only).
        widest_channel, channel_spread: the channel (last axis) with the widest range, and
            how many times wider it is than a typical channel (the 90th percentile of the others).
    """

    name: str
    op: str
    max_abs: float
    mean_abs: float
    cosine: float
    float_min: float
    float_max: float
    scale: float
    zero_point: int
    levels: float
    p999_abs: float = 0.0
    distinct_int8: int = 0
    distinct_float: int = 0
    widest_channel: int = -1
    channel_spread: float = 1.0


@dataclass(frozen=True)
class AccuracyReport:
    """The accuracy report of one int8 model against its float model.

    ``layers`` are ranked worst first (lowest cosine). ``task`` holds the task metric
    for the face models (faces found, IoU, score drift; landmark error), else None.
    """

    model: str
    against: str
    images: tuple[str, ...]
    outputs: tuple[TensorError, ...]
    layers: tuple[TensorError, ...]
    task: dict | None = None
    warnings: tuple[str, ...] = ()
    float_ops: tuple[str, ...] = ()
    quantizer: dict = field(default_factory=dict)

    def worst_layers(self, n: int = WORST) -> tuple[TensorError, ...]:
        return self.layers[:n]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["worst_layers"] = [t.name for t in self.worst_layers()]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=float)

    def to_text(self) -> str:
        lines = [f"int8 {self.model}", f"vs   {self.against}", f"on   {len(self.images)} held-aside input(s)"]
        lines.append("outputs" + " " * 28 + "max_abs   mean_abs   cosine   levels")
        for t in self.outputs:
            lines.append(f"  {t.name[:32]:<32} {t.max_abs:9.4g} {t.mean_abs:9.4g} {t.cosine:9.5f} {t.levels:8.0f}")
        lines.append(f"layers losing most (of {len(self.layers)})")
        for t in self.worst_layers():
            lines.append(f"  {t.name[:40]:<40} {t.op:<26} cosine {t.cosine:.5f}  max_abs {t.max_abs:.4g}")
        if self.task:
            lines.append("task " + ", ".join(f"{k}={_fmt(v)}" for k, v in self.task.items() if not isinstance(v, list)))
        if self.float_ops:
            lines.append(f"left in float ({len(self.float_ops)}): " + "; ".join(self.float_ops[:8]))
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class _Stats:
    """Running error statistics of one tensor over several images."""

    def __init__(self):
        self.n = 0
        self.abs_sum = self.max_abs = self.dot = self.ff = self.qq = 0.0
        self.lo, self.hi, self.p999 = np.inf, -np.inf, 0.0
        self.q_values: set = set()
        self.f_values: set = set()
        self.channel_max: np.ndarray | None = None

    def add(self, f: np.ndarray, d: np.ndarray, q: np.ndarray | None, track_values: bool) -> None:
        f_shape = f.shape
        f = f.astype(np.float64).ravel()
        d = d.astype(np.float64).ravel()
        err = np.abs(f - d)
        self.n += f.size
        self.abs_sum += float(err.sum())
        self.max_abs = max(self.max_abs, float(err.max(initial=0.0)))
        self.dot += float(f @ d)
        self.ff += float(f @ f)
        self.qq += float(d @ d)
        self.lo, self.hi = min(self.lo, float(f.min(initial=np.inf))), max(self.hi, float(f.max(initial=-np.inf)))
        self.p999 = max(self.p999, float(np.percentile(np.abs(f), 99.9)) if f.size else 0.0)
        if f_shape and len(f_shape) >= 2 and f_shape[-1] > 1:
            per_channel = np.abs(f).reshape(-1, f_shape[-1]).max(axis=0)
            self.channel_max = per_channel if self.channel_max is None else np.maximum(self.channel_max, per_channel)
        if track_values and q is not None:
            self.q_values.update(np.unique(q).tolist()[:4096])
            self.f_values.update(np.unique(f).tolist()[:4096])

    def result(self, name: str, op: str, scale: float, zero_point: int) -> TensorError:
        denom = np.sqrt(self.ff * self.qq)
        cosine = self.dot / denom if denom > 0 else (1.0 if self.ff == self.qq else 0.0)
        span = self.hi - self.lo
        widest, spread = -1, 1.0
        if self.channel_max is not None:
            widest = int(np.argmax(self.channel_max))
            typical = float(np.percentile(np.delete(self.channel_max, widest), 90))
            spread = float(self.channel_max[widest] / typical) if typical > 0 else 1.0
        return TensorError(
            name=name, op=op, max_abs=self.max_abs, mean_abs=self.abs_sum / max(self.n, 1), cosine=float(cosine),
            float_min=self.lo, float_max=self.hi, scale=scale, zero_point=zero_point,
            levels=float(span / scale) if scale > 0 else 0.0, p999_abs=self.p999,
            distinct_int8=len(self.q_values), distinct_float=len(self.f_values),
            widest_channel=widest, channel_spread=spread,
        )  # fmt: skip


def _interpreter(data: bytes):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:
        with warnings.catch_warnings():  # keeping every tensor is the point here, not a debugging leftover
            warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors.*")
            it = Interpreter(
                model_content=data,
                num_threads=1,
                experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                experimental_preserve_all_tensors=True,
            )
        it.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise ModelFileError(f"LiteRT cannot load the model: {exc}") from None
    return it


def _writers(it) -> dict[int, str]:
    """Tensor index -> ``"OP (node N)"`` for every operator output."""
    names = {}
    for node in it._get_ops_details():
        for out in node["outputs"]:
            names[int(out)] = f"{node['op_name']} (node {node['index']})"
    return names


def _quantize_input(tensor: np.ndarray, detail: dict) -> np.ndarray:
    if detail["dtype"] == np.float32:
        return tensor.astype(np.float32)
    scale, zero = detail["quantization"]
    info = np.iinfo(detail["dtype"])
    return np.clip(np.round(tensor / scale) + zero, info.min, info.max).astype(detail["dtype"])


def compare(int8_data: bytes, float_data: bytes, samples) -> tuple[tuple[TensorError, ...], tuple[TensorError, ...]]:
    """(outputs, layers ranked worst first) over ``samples`` (`calibration.Sample`, float input tensors)."""
    fi, qi = _interpreter(float_data), _interpreter(int8_data)
    float_tensors = {d["name"]: d["index"] for d in fi.get_tensor_details()}
    q_details = [d for d in qi.get_tensor_details() if d["dtype"] in (np.int8, np.uint8, np.int16)]
    const = {int(d["index"]) for d in q_details if _is_constant(qi, d)}
    pairs = [
        (d, float_tensors[_base(d["name"])])
        for d in q_details
        if d["index"] not in const and _base(d["name"]) in float_tensors and d["quantization"][0] > 0
    ]
    out_names = {_base(d["name"]) for d in qi.get_output_details()}
    stats = {d["index"]: _Stats() for d, _ in pairs}
    q_in = qi.get_input_details()[0]
    f_in = fi.get_input_details()[0]
    if not samples:
        raise InputError("no held-aside images to evaluate on")
    for sample in samples:
        fi.set_tensor(f_in["index"], sample.tensor.astype(np.float32))
        fi.invoke()
        qi.set_tensor(q_in["index"], _quantize_input(sample.tensor, q_in))
        qi.invoke()
        for d, f_index in pairs:
            scale, zero = d["quantization"]
            q = qi.get_tensor(d["index"])
            f = fi.get_tensor(f_index)
            if q.shape != f.shape:
                continue
            dq = (q.astype(np.float32) - zero) * scale
            stats[d["index"]].add(f, dq, q, _base(d["name"]) in out_names)
    writers = _writers(qi)
    results = {
        d["index"]: stats[d["index"]].result(_base(d["name"]), writers.get(d["index"], "input"), *d["quantization"])
        for d, _ in pairs
        if stats[d["index"]].n
    }
    by_name = {r.name: r for r in results.values()}
    outputs = tuple(by_name[n] for n in (_base(d["name"]) for d in qi.get_output_details()) if n in by_name)
    layers = tuple(sorted(by_name.values(), key=lambda r: (r.cosine, -r.max_abs)))
    return outputs, layers


def _base(name: str) -> str:
    return name[: -len("/int8")] if name.endswith("/int8") else name


def _is_constant(it, detail) -> bool:
    # Constant tensors (weights, biases) keep their data; activations have no buffer of their own.
    try:
        return it._interpreter.TensorIsConstant(detail["index"])  # noqa: SLF001
    except AttributeError:
        return False


def trap_warnings(outputs: tuple[TensorError, ...], layers: tuple[TensorError, ...]) -> list[str]:
    """Warnings for the known int8 traps."""
    warnings = []
    for t in outputs:
        if t.float_max > t.float_min and t.levels < FEW_LEVELS:
            warnings.append(
                f"output {t.name!r} spans only {t.levels:.1f} int8 steps over its range "
                f"[{t.float_min:.4g}, {t.float_max:.4g}] (scale {t.scale:.4g}): its resolution is crushed"
            )
        if t.distinct_int8 <= 2 < t.distinct_float or (t.distinct_int8 <= 4 and t.distinct_float >= 16):
            warnings.append(
                f"output {t.name!r} collapsed to {t.distinct_int8} distinct value(s) where the float model gave "
                f"{t.distinct_float}"
            )
    shared: dict[tuple, list[TensorError]] = {}
    for t in outputs:
        shared.setdefault((t.scale, t.zero_point), []).append(t)
    for group in shared.values():
        spans = [max(abs(t.float_min), abs(t.float_max)) for t in group]
        if len(group) > 1 and min(spans) > 0 and max(spans) / min(spans) > 8:
            warnings.append(
                f"outputs {', '.join(repr(t.name) for t in group)} share one scale ({group[0].scale:.4g}) but their "
                f"ranges differ {max(spans) / min(spans):.0f}x: the smaller one loses its resolution"
            )
    outliers = [
        t for t in layers
        if t.p999_abs > 0 and 255 * t.scale / (2 * t.p999_abs) > OUTLIER_RATIO
    ]  # fmt: skip
    outliers.sort(key=lambda t: -t.scale / t.p999_abs)
    for t in outliers[:WORST]:
        warnings.append(
            f"activation {t.name!r} ({t.op}): its int8 range ±{127 * t.scale:.4g} is set by outliers, 99.9% of "
            f"values lie within ±{t.p999_abs:.4g} and get only {2 * t.p999_abs / t.scale:.0f} levels"
        )
    wide = sorted((t for t in layers if t.channel_spread > CHANNEL_SPREAD), key=lambda t: -t.channel_spread)
    for t in wide[:WORST]:
        warnings.append(
            f"activation {t.name!r} ({t.op}): channel {t.widest_channel} spans {t.channel_spread:.0f}x the range of "
            f"a typical channel and sets the int8 scale of all of them"
        )
    return warnings


def read_model_bytes(path: Path, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ModelFileError(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelFileError(f"{what} {str(path)!r} is not a .tflite model (no TFL3 identifier)")
    return data
