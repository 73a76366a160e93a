"""Static post-training int8 quantization of .tflite models, with the accuracy it kept.

int8 activations, symmetric int8 weights (per output channel by default) and int32
biases, calibrated on real images fed through the model's own preprocessing
(`edgeinf.preprocess`). The quantizer is ai-edge-quantizer (no TensorFlow needed),
after the fix-ups in `edgeinf.quantize.prepare`. Every result is checked to load on
LiteRT and comes with an `AccuracyReport`: per output and per layer error against the
float model on held-aside images, the task metric for the face models, and warnings
for the known int8 traps.

>>> from edgeinf.quantize import quantize
>>> result = quantize("model.tflite", ["photos/"], "model_int8.tflite",
...                   options={"mean": 127.5, "std": 127.5})     # doctest: +SKIP
>>> print(result.report.to_text())                              # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError, ModelFileError, UnsupportedOperatorError

if TYPE_CHECKING:
    from .report import AccuracyReport

log = logging.getLogger(__name__)

__all__ = ["AccuracyReport", "QuantizeResult", "check_accuracy", "int8_path", "quantize"]


@dataclass(frozen=True)
class QuantizeResult:
    """What `quantize` wrote.

    Attributes:
        output: the int8 model file; sha256: its digest.
        calibration: the images calibrated on; held_aside: the images the report used.
        samples: preprocessed calibration inputs (photos, their mirror images, crops).
        prepared: what the fix-ups changed (opcodes fixed, signature added, float16 folded).
        float_ops: operators the quantizer left in float (``"PRELU (node 12, ...)"``).
        report: the `AccuracyReport`, unless ``evaluate=False``.
    """

    output: Path
    sha256: str
    calibration: tuple[str, ...]
    held_aside: tuple[str, ...]
    samples: int
    prepared: dict = field(default_factory=dict)
    float_ops: tuple[str, ...] = ()
    report: AccuracyReport | None = None

    def to_dict(self) -> dict:
        return {
            "output": str(self.output),
            "sha256": self.sha256,
            "calibration": list(self.calibration),
            "held_aside": list(self.held_aside),
            "samples": self.samples,
            "prepared": self.prepared,
            "float_ops": list(self.float_ops),
            "report": None if self.report is None else self.report.to_dict(),
        }


def _model_path(model) -> Path:
    from ..model import resolve_path

    return resolve_path(model)


def _samples(float_path: Path, files, task, frames):
    """Preprocessed inputs for ``files``; raises InputError for an image that does not decode."""
    from ..model import load
    from .calibration import read_rgb, tensors

    out = []
    with load(float_path, num_threads=1, check=False) as model:
        for f in files:
            rgb = read_rgb(f)
            out += list(tensors(model, frames(task, f.name, rgb), task.options))
    return out


def quantize(
    model: str | os.PathLike,
    calib: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    per_channel: bool = True,
    io: str = "int8",
    options: dict | None = None,
    task: str | None = None,
    strict: bool = False,
    output_ranges: dict[str, tuple[float, float]] | None = None,
    equalize_ranges: bool = True,
    evaluate: bool = True,
    progress: bool | None = None,
) -> QuantizeResult:
    """Quantize a float .tflite model to int8, calibrated on real images.

    Args:
        model: the float .tflite (a path or a manifest name).
        calib: image files and/or directories of images. Every 4th image (from the
            second on) is held aside for the accuracy report when there are several.
        output: where to write the int8 model.
        per_channel: per-output-channel weight scales (else one scale per tensor).
        io: the interface: ``"int8"`` (as the quantizer gives), ``"uint8"`` or ``"float"``.
        options: preprocessing as for ``Model.run_image`` (mean, std, letterbox,
            resize, channel_order...); default: what edgeinf knows of the face models,
            else the model's metadata.
        task: force a known task (a face model's manifest name); default: recognised
            from the model's sha256 or file name.
        strict: raise `UnsupportedOperatorError` if the quantizer leaves any operator in float.
        output_ranges: output name -> (min, max) to clip its calibrated range to (and that
            of the tensors it only rearranges), for outputs whose useful range is known:
            e.g. score logits. Face detectors get their score logits clipped to ±10.
        equalize_ranges: rescale channels that would set a whole activation's int8 scale,
            between convolutions where that leaves the float model unchanged
            (`edgeinf.quantize.equalize`).
        evaluate: compute the `AccuracyReport` (``result.report``).
        progress: draw a progress bar on stderr (default: when stderr is a terminal).

    Returns:
        A `QuantizeResult`.

    Raises:
        InputError: no calibration images, an image that does not decode, a float input
            whose normalization nobody states, or no faces in the photos of a face mesh.
        ModelFileError: not a .tflite model, or a model that is already quantized.
        UnsupportedOperatorError: the quantizer failed on an operator, or (``strict``) left
            operators in float: each is named with its node.
        BackendUnavailableError: ai-edge-quantizer is not installed.
    """
    from ..zoo import sha256_of
    from .calibration import Progress, image_files, split_holdout
    from .engine import float_operators, is_quantized, quantize_prepared
    from .io_types import IO_TYPES, set_io_type
    from .prepare import prepare
    from .report import _interpreter, read_model_bytes
    from .tasks import calibration_frames, task_for

    if io not in IO_TYPES:
        raise InputError(f"io must be one of {', '.join(IO_TYPES)}, got {io!r}")
    float_path = _model_path(model)
    data = read_model_bytes(float_path, "model")
    if is_quantized(data):
        raise ModelFileError(
            f"{float_path.name} is already quantized (int8/uint8 activations): quantize its float original"
        )
    files = image_files(calib)
    calib_files, held = split_holdout(files)
    the_task = task_for(float_path, options, task)
    samples = _samples(float_path, calib_files, the_task, calibration_frames)
    if not samples:
        raise InputError(
            f"the {len(calib_files)} calibration image(s) gave no input for {float_path.name}"
            + (
                ": the face mesh is calibrated on faces, and no face was found"
                if the_task.kind == "face_landmark"
                else ""
            )
        )
    prepared, fixups = prepare(data)
    changes: dict[str, int | dict[str, float]] = dict(fixups)
    if equalize_ranges:
        from .equalize import candidate_tensors, channel_ranges, equalize

        ranges_seen = channel_ranges(prepared, candidate_tensors(prepared), [s.tensor for s in samples])
        prepared, rescaled = equalize(prepared, ranges_seen)
        changes["channels_equalized"] = {k: round(v, 2) for k, v in rescaled.items()}
    input_name = _input_name(prepared)
    ranges = {**the_task.output_ranges(_output_shapes(prepared)), **(output_ranges or {})}
    bar = Progress(len(samples), "calibrating", enabled=progress)
    try:
        quantized = quantize_prepared(
            prepared, [s.tensor for s in samples], input_name, per_channel, bar, output_ranges=ranges
        )
    finally:
        bar.close()
    quantized = set_io_type(quantized, io)
    leftover = tuple(float_operators(quantized))
    if strict and leftover:
        raise UnsupportedOperatorError(
            f"the quantizer cannot quantize {len(leftover)} operator(s) of {float_path.name}, left in float: "
            + "; ".join(leftover)
        )
    _interpreter(quantized)  # LiteRT must load it (raises ModelFileError otherwise)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = out.with_name(out.name + f".tmp{os.getpid()}")
    staged.write_bytes(quantized)
    os.replace(staged, out)
    report = None
    if evaluate:
        from dataclasses import replace

        report = check_accuracy(out, float_path, held, options=options, task=task, _float_ops=leftover)
        settings = {"per_channel": per_channel, "io": io, "output_ranges": {k: list(v) for k, v in ranges.items()}}
        notes = [f"output {k!r}: calibrated range clipped to [{lo:g}, {hi:g}]" for k, (lo, hi) in ranges.items()]
        report = replace(report, quantizer=settings, warnings=(*report.warnings, *notes))
    return QuantizeResult(
        output=out,
        sha256=sha256_of(out),
        calibration=tuple(str(f) for f in calib_files),
        held_aside=tuple(str(f) for f in held),
        samples=len(samples),
        prepared=changes,
        float_ops=leftover,
        report=report,
    )


def _output_shapes(prepared: bytes) -> dict[str, tuple[int, ...]]:
    from ..formats.tflite_writer import unpack

    sg = unpack(prepared).subgraphs[0]
    shapes = {}
    for i in sg.outputs:
        t = sg.tensors[int(i)]
        shapes[t.name.decode() if isinstance(t.name, bytes) else str(t.name)] = tuple(int(d) for d in t.shape)
    return shapes


def _input_name(prepared: bytes) -> str:
    from ..formats.tflite_writer import unpack

    model = unpack(prepared)
    sg = model.subgraphs[0]
    if len(sg.inputs) != 1:
        raise InputError(f"image calibration feeds models with one input; this one has {len(sg.inputs)}")
    name = sg.tensors[int(sg.inputs[0])].name
    return name.decode() if isinstance(name, bytes) else str(name)


def check_accuracy(
    model: str | os.PathLike,
    against: str | os.PathLike,
    images: Sequence[str | os.PathLike],
    *,
    options: dict | None = None,
    task: str | None = None,
    _float_ops: tuple[str, ...] | None = None,
):
    """The `AccuracyReport` of an int8 model (made here or elsewhere) against its float model.

    Args:
        model: the int8 .tflite. against: the float .tflite it came from.
        images: image files or directories to evaluate on (held aside from calibration).
        options, task: as for `quantize`.

    Raises:
        InputError: no images, or an image that does not decode.
        ModelFileError: either file is not a .tflite model LiteRT loads.
    """
    from .calibration import image_files, read_rgb
    from .engine import float_operators
    from .report import AccuracyReport, compare, read_model_bytes, trap_warnings
    from .tasks import evaluation_frames, task_for, task_metric

    int8_path, float_path = _model_path(model), _model_path(against)
    int8_data = read_model_bytes(int8_path, "int8 model")
    float_data = read_model_bytes(float_path, "float model")
    files = image_files(images)
    the_task = task_for(float_path, options, task)
    samples = _samples(float_path, files, the_task, evaluation_frames)
    if not samples:
        raise InputError(f"the {len(files)} image(s) gave no input to evaluate {float_path.name} on (no faces found?)")
    outputs, layers = compare(int8_data, float_data, samples)
    photos = [(f.name, read_rgb(f)) for f in files]
    metric = task_metric(float_path, int8_path, the_task, photos)
    float_ops = _float_ops if _float_ops is not None else tuple(float_operators(int8_data))
    warnings = trap_warnings(outputs, layers)
    if float_ops:
        warnings.append(f"{len(float_ops)} operator(s) left in float by the quantizer: " + "; ".join(float_ops[:5]))
    return AccuracyReport(
        model=str(int8_path),
        against=str(float_path),
        images=tuple(s.source for s in samples),
        outputs=outputs,
        layers=layers,
        task=metric,
        warnings=tuple(warnings),
        float_ops=float_ops,
    )


def int8_path(name: str) -> Path:
    """The int8 version of a manifest face model, built on first use and cached. See `models.int8_path`."""
    from .models import int8_path as build

    return build(name)


def __getattr__(name):
    if name == "AccuracyReport":
        from .report import AccuracyReport

        return AccuracyReport
    raise AttributeError(f"module 'edgeinf.quantize' has no attribute {name!r}")
