"""Compare a converted model with its ONNX original on the same inputs.

Outputs are paired in order. A converter may change an output's layout (onnx2tf makes
4-D outputs NHWC) or drop unit dimensions (NCNN has no batch axis): the converted array
is lined up with the original before comparing, and the report says how. Errors are per
output: the largest and the mean absolute difference, the original's largest magnitude
(to judge them), and the cosine similarity of the flattened outputs. Where an output is
a score per class (``[batch, classes]``, or ``[batch, steps, classes]`` as a CTC text
recognizer gives), the share of rows whose top class agrees is the task metric; where it
is a detector's score map, the detections of both models matched by IoU
(`edgeinf.convert.detections`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .detections import DetectionAgreement


@dataclass
class OutputError:
    """How far one converted output is from the original, over every sample."""

    name: str
    shape: tuple[int, ...]
    converted_shape: tuple[int, ...]
    alignment: str  # "same", "NHWC->NCHW", "reshaped"
    max_abs: float = 0.0
    mean_abs: float = 0.0
    reference_max_abs: float = 0.0
    cosine: float = 1.0
    top1_agreement: float | None = None
    detections: DetectionAgreement | None = None
    _sum_abs: float = field(default=0.0, repr=False)
    _count: int = field(default=0, repr=False)
    _top1_same: int = field(default=0, repr=False)
    _top1_total: int = field(default=0, repr=False)

    def add(self, reference: np.ndarray, converted: np.ndarray) -> None:
        ref = reference.astype(np.float64).ravel()
        got = converted.astype(np.float64).ravel()
        diff = np.abs(ref - got)
        self.max_abs = max(self.max_abs, float(diff.max(initial=0.0)))
        self._sum_abs += float(diff.sum())
        self._count += diff.size
        self.mean_abs = self._sum_abs / max(self._count, 1)
        self.reference_max_abs = max(self.reference_max_abs, float(np.abs(ref).max(initial=0.0)))
        norms = float(np.linalg.norm(ref) * np.linalg.norm(got))
        cosine = float(ref @ got / norms) if norms > 0 else (1.0 if not diff.any() else 0.0)
        self.cosine = min(self.cosine, cosine)  # the worst sample: one bad input is enough to fail
        if reference.ndim in (2, 3) and reference.shape[-1] >= 2:  # class scores, or per step of a sequence
            same = reference.argmax(-1) == converted.reshape(reference.shape).argmax(-1)
            self._top1_same += int(same.sum())
            self._top1_total += same.size
            self.top1_agreement = self._top1_same / self._top1_total

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "converted_shape": list(self.converted_shape),
            "alignment": self.alignment,
            "max_abs": self.max_abs,
            "mean_abs": self.mean_abs,
            "reference_max_abs": self.reference_max_abs,
            "cosine": self.cosine,
            "top1_agreement": self.top1_agreement,
            "detections": None if self.detections is None else self.detections.as_dict(),
        }


def align(reference: np.ndarray, converted: np.ndarray) -> tuple[np.ndarray, str] | None:
    """``converted`` laid out as ``reference``, and how; None when they cannot be paired."""
    if converted.shape == reference.shape:
        return converted, "same"
    if reference.ndim == 4 and converted.ndim == 4:
        n, c, h, w = reference.shape
        if converted.shape == (n, h, w, c):
            return converted.transpose(0, 3, 1, 2), "NHWC->NCHW"
    if converted.size == reference.size:
        squeezed = tuple(d for d in converted.shape if d != 1)
        if squeezed == tuple(d for d in reference.shape if d != 1):
            return converted.reshape(reference.shape), "reshaped"
    return None


@dataclass(frozen=True)
class Tolerance:
    """The largest absolute error and the smallest cosine a conversion may show."""

    atol: float
    min_cosine: float

    @staticmethod
    def default(fp16: bool) -> Tolerance:
        # fp16 weights and arithmetic lose about 3 decimal digits; fp32 conversions differ
        # only in the order of additions.
        return Tolerance(atol=5e-2, min_cosine=0.999) if fp16 else Tolerance(atol=1e-3, min_cosine=0.99999)

    def failures(self, errors: list[OutputError]) -> list[str]:
        out = []
        for e in errors:
            if not e.max_abs <= self.atol:  # NaN fails too
                out.append(f"output {e.name!r}: max abs error {e.max_abs:.3g} > {self.atol:g}")
            if not e.cosine >= self.min_cosine:
                out.append(f"output {e.name!r}: cosine {e.cosine:.6f} < {self.min_cosine:g}")
        return out
