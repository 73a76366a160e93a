"""Convert an ONNX model to NCNN (pnnx) or TFLite (onnx2tf), then prove the conversion.

Every conversion is checked and verified: the result is checked for the runtime that
will run it (`edgeinf.check`), then the ONNX model on ONNX Runtime and the converted one
run on the same real inputs, and the errors per output decide whether it passed.

>>> report = edgeinf.convert.convert("cls.onnx", "ncnn", "out", input_shapes=["1,3,48,192"])  # doctest: +SKIP
>>> report.passed, report.files                                                              # doctest: +SKIP
(True, ['out/cls.param', 'out/cls.bin'])
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np

from ..errors import InputError, ModelFileError
from .verify import OutputError, Tolerance, align

log = logging.getLogger(__name__)

SCHEMA = "edgeinf.convert/1"
TARGETS = ("ncnn", "tflite")
MAX_DIMENSION = 1 << 16
"""The largest size one dimension of ``--input-shape`` may ask for."""
MAX_INPUT_ELEMENTS = 1 << 27
"""The largest input a conversion is verified with (512 MB of float32)."""

__all__ = ["SCHEMA", "TARGETS", "ConversionReport", "Tolerance", "convert", "parse_input_shapes"]


@dataclass
class ConversionReport:
    """What a conversion made, how the result checks, and how far its outputs are from the original.

    ``passed`` is True when the converter succeeded, the result runs on its runtime, and
    every output is within the tolerance; ``failures`` says why not, naming the ONNX nodes
    behind an operator the result cannot run.
    """

    model: str
    to: str
    files: list[str] = field(default_factory=list)
    converter: dict = field(default_factory=dict)
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    check: dict = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    outputs: list[OutputError] = field(default_factory=list)
    tolerance: Tolerance | None = None
    verified: bool = False
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "model": self.model,
            "to": self.to,
            "passed": self.passed,
            "failures": list(self.failures),
            "files": list(self.files),
            "converter": dict(self.converter),
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "check": dict(self.check),
            "verification": {
                "verified": self.verified,
                "samples": list(self.samples),
                "tolerance": None
                if self.tolerance is None
                else {"atol": self.tolerance.atol, "min_cosine": self.tolerance.min_cosine},
                "outputs": [e.as_dict() for e in self.outputs],
            },
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_text(self) -> str:
        lines = [f"{self.model} -> {self.to}: {'PASSED' if self.passed else 'FAILED'}"]
        if self.converter:
            lines.append(f"  converter  {self.converter.get('tool')} {self.converter.get('version')}")
            lines.append(f"  command    {' '.join(self.converter.get('command', []))}")
        for f in self.files:
            lines.append(f"  wrote      {f}")
        if self.check:
            lines.append(f"  check      {self.check.get('verdict')} on {self.check.get('target')}")
        t = self.tolerance
        if self.verified and t is not None:
            lines.append(
                f"  verified   on {len(self.samples)} input(s), tolerance max abs {t.atol:g}, cosine {t.min_cosine:g}"
            )
            for e in self.outputs:
                top1 = "" if e.top1_agreement is None else f"  top-1 agreement {e.top1_agreement:.0%}"
                lines.append(
                    f"    {e.name}: max abs {e.max_abs:.3g}, mean abs {e.mean_abs:.3g} "
                    f"(outputs up to {e.reference_max_abs:.3g}), cosine {e.cosine:.6f}{top1}"
                    + ("" if e.alignment == "same" else f"  [{e.alignment}]")
                )
                d = e.detections
                if d is not None:
                    lines.append(
                        f"      detections: {d.matched} matched of {d.reference} (original) and {d.converted} "
                        f"(converted), mean IoU {d.mean_iou:.3f}, max score difference {d.max_score_delta:.3g}"
                    )
        for failure in self.failures:
            lines.append(f"  FAILED: {failure}")
        return "\n".join(lines)


_SHAPE = re.compile(r"^(?:(?P<name>[^:\s]+):)?(?P<dims>\d+(?:[,x]\d+)*)$")


def parse_input_shapes(texts, inputs) -> dict[str, tuple[int, ...]]:
    """Fixed shapes for every graph input: ``texts`` (``"1,3,48,192"`` in input order or
    ``"x:1,3,48,192"`` by name) fill the dynamic ones; a dynamic batch alone defaults to 1.

    Raises:
        InputError: a malformed or out-of-range shape, an unknown input, or an input
            whose dynamic dimensions nobody fixed.
    """
    given: dict[str, tuple[int, ...]] = {}
    names = [v.name for v in inputs]
    for position, text in enumerate(texts or ()):
        m = _SHAPE.match(text.strip())
        if not m:
            raise InputError(f"--input-shape {text!r}: expected dimensions like 1,3,224,224 or NAME:1,3,224,224")
        name = m.group("name") or (names[position] if position < len(names) else None)
        if name is None or name not in names:
            raise InputError(f"--input-shape {text!r}: the model's inputs are {names}")
        dims = tuple(int(d) for d in re.split(r"[,x]", m.group("dims")))
        if any(not 1 <= d <= MAX_DIMENSION for d in dims):
            raise InputError(f"--input-shape {text!r}: every dimension must be from 1 to {MAX_DIMENSION}")
        given[name] = dims
    shapes = {}
    for value in inputs:
        declared = value.shape
        if value.name in given:
            shape = given[value.name]
            if declared is not None and (
                len(declared) != len(shape)
                or any(isinstance(d, int) and d >= 0 and d != s for d, s in zip(declared, shape))
            ):
                raise InputError(
                    f"--input-shape {list(shape)} does not fit input {value.name!r} of shape {list(declared)}"
                )
        elif declared is not None and all(isinstance(d, int) and d >= 0 for d in declared[1:]):
            batch = declared[:1]
            shape = (*(d if isinstance(d, int) and d >= 0 else 1 for d in batch), *declared[1:])
        else:
            raise InputError(
                f"input {value.name!r} has dynamic shape {list(declared) if declared else 'unknown'}: "
                f"give its size with --input-shape {value.name}:1,3,224,224 (for example)"
            )
        if int(np.prod(shape)) > MAX_INPUT_ELEMENTS:
            raise InputError(
                f"input {value.name!r} of shape {list(shape)} is larger than {MAX_INPUT_ELEMENTS} elements"
            )
        shapes[value.name] = tuple(int(d) for d in shape)
    return shapes


def convert(
    model: Union[str, os.PathLike],
    to: str,
    out_dir: Union[str, os.PathLike],
    *,
    input_shapes=None,
    fp16: bool = False,
    verify: bool = True,
    tolerance: Tolerance | None = None,
    images=(),
    num_threads: int = 1,
    pnnx=None,
) -> ConversionReport:
    """Convert an ONNX model, check the result for its runtime, and verify its outputs.

    Args:
        model: an .onnx file or a manifest name (``edgeinf.zoo.names()``).
        to: ``"ncnn"`` (pnnx) or ``"tflite"`` (onnx2tf, which needs TensorFlow).
        out_dir: the folder for the converted files (created if missing).
        input_shapes: strings like ``"1,3,48,192"`` (in input order) or ``"x:1,3,48,192"``;
            required for inputs with dynamic dimensions other than the batch.
        fp16: store weights in float16 (NCNN also computes in fp16); the default tolerance widens.
        verify: run both models on the same inputs and compare.
        tolerance: the largest error allowed; default `Tolerance.default(fp16)`.
        images: photos to make the inputs from (default: the manifest's portrait).
        num_threads: threads for both runtimes while verifying.
        pnnx: the pnnx executable (default: the one of the installed ``pnnx`` package).

    Returns:
        A `ConversionReport`; ``report.passed`` says whether to trust the result.

    Raises:
        ModelFileError: the model is not a readable ONNX file.
        InputError: a bad target or input shape.
        BackendUnavailableError: the converter (or ONNX Runtime, to verify) is not installed.
        RuntimeFailure: the converter itself failed.
    """
    from .. import compat
    from ..formats.onnx import read_onnx
    from ..model import load, model_kind, resolve_path

    if to not in TARGETS:
        raise InputError(f"cannot convert to {to!r}: expected one of {list(TARGETS)}")
    path = resolve_path(model)
    kind = model_kind(path)
    if kind != "onnx":
        raise ModelFileError(f"{path.name} is a {kind} model: edgeinf converts ONNX models")
    parsed = read_onnx(path)
    shapes = parse_input_shapes(input_shapes, parsed.inputs)
    if to == "ncnn" and any(s[0] != 1 for s in shapes.values() if len(s) == 4):
        raise InputError(f"NCNN runs one image at a time: give the batch dimension as 1 (got {shapes})")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"the output folder {out} is a file")
    report = ConversionReport(model=str(path), to=to, input_shapes={k: list(v) for k, v in shapes.items()})
    source_check = compat.check(path, backend=to, model=parsed)  # which ONNX nodes the converter table doubts

    if to == "ncnn":
        from . import pnnx as pnnx_tool

        param, weights, command = pnnx_tool.to_ncnn(
            path, out, list(shapes.values()), fp16=fp16, external=parsed.external_data, pnnx=pnnx
        )
        report.files = [str(param), str(weights)]
        converted, options = param, {"fp16": fp16}
        report.converter = {"tool": "pnnx", "version": pnnx_tool.version(), "command": command}
    else:
        from . import onnx2tf as onnx2tf_tool

        converted, command = onnx2tf_tool.to_tflite(path, out, shapes, fp16=fp16, external=parsed.external_data)
        report.files = [str(converted)]
        options = {}
        report.converter = {"tool": "onnx2tf", "version": onnx2tf_tool.version(), "command": command}

    result_check = compat.check(converted, backend=to)
    verdict = result_check.backends[to]
    source_verdict = source_check.backends[to]
    report.check = {
        "target": verdict.target,
        "verdict": verdict.verdict,
        "runnable": verdict.runnable,
        "blockers": list(verdict.blockers),
        # what the converter's table foretold from the ONNX graph, node by node
        "predicted_verdict": source_verdict.verdict,
        "predicted_blockers": list(source_verdict.blockers),
    }
    if not verdict.runnable:
        report.failures.append(_unrunnable(to, verdict.blockers, source_check))
        return report
    if not verify:
        return report

    from . import detections
    from . import samples as sampling

    tolerance = tolerance or Tolerance.default(fp16)
    report.tolerance = tolerance
    with (
        load(path, backend="onnxruntime", num_threads=num_threads, check=False) as original,
        load(converted, backend=to, num_threads=num_threads, check=False, **options) as result,
    ):
        dtypes = {spec.name: spec.dtype for spec in original.inputs}
        made = sampling.make(shapes, dtypes, [Path(p) for p in images])
        image_sizes = [(s[2], s[3]) for s in shapes.values() if len(s) == 4 and s[1] in (1, 3)]
        detecting = importlib.util.find_spec("cv2") is not None  # it finds a score map's regions
        errors: list[OutputError | None] = [None] * len(original.outputs)
        for sample in made:
            reference = original.run(sample.arrays)
            got = result.run(_converted_inputs(result, original, sample.arrays))
            if len(result.outputs) != len(original.outputs):
                report.failures.append(
                    f"the converted model has {len(result.outputs)} output(s), the original {len(original.outputs)}"
                )
                return report
            pairs = _paired(original.outputs, result.outputs, "out")
            for i, (spec, converted_spec) in enumerate(pairs):
                ref, value = reference[spec.name], got[converted_spec.name]
                lined = align(ref, value)
                if lined is None:
                    report.failures.append(
                        f"output {spec.name!r}: shape {list(ref.shape)} but the converted model gives {list(value.shape)}"
                    )
                    return report
                error = errors[i]
                if error is None:
                    error = errors[i] = OutputError(spec.name, ref.shape, value.shape, lined[1])
                    if detecting and detections.is_score_map(ref.shape, image_sizes):
                        error.detections = detections.DetectionAgreement()
                error.add(ref, lined[0])
                agreement = error.detections
                if agreement is not None:
                    for one, other in zip(ref[:, 0], lined[0][:, 0]):
                        agreement.add(detections.from_score_map(one), detections.from_score_map(other))
            report.samples.append(sample.description)
    report.outputs = [e for e in errors if e is not None]
    report.verified = True
    report.failures += tolerance.failures(report.outputs)
    return report


def _paired(original_specs, converted_specs, prefix: str) -> list[tuple]:
    """(original, converted) spec pairs: by the original's names when the converter kept them,
    else by pnnx's ``in0/out0`` names, else in order."""
    by_name = {spec.name: spec for spec in converted_specs}
    for key in (lambda i, spec: spec.name, lambda i, spec: f"{prefix}{i}"):
        names = [key(i, spec) for i, spec in enumerate(original_specs)]
        if all(name in by_name for name in names):
            return [(spec, by_name[name]) for spec, name in zip(original_specs, names)]
    return list(zip(original_specs, converted_specs))


def _converted_inputs(result, original, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The original's inputs by the converted model's names and layout."""
    out = {}
    for spec, converted in _paired(original.inputs, result.inputs, "in"):
        array = arrays[spec.name]
        shape = converted.shape
        if array.ndim == 4 and len(shape) == 4 and shape[1] != array.shape[1] and shape[3] == array.shape[1]:
            array = np.ascontiguousarray(array.transpose(0, 2, 3, 1))  # onnx2tf's NHWC inputs
        out[converted.name] = array
    return out


def _unrunnable(to: str, blockers, source_check) -> str:
    runtime = {"ncnn": "ncnn", "tflite": "the TFLite runtime"}[to]
    text = f"the converted model does not run on {runtime}: " + "; ".join(blockers)
    origin = list(source_check.backends[to].blockers)
    if origin:
        text += f". In the ONNX model: {'; '.join(origin)}"
    return text
