"""Small frozen value types shared by every layer. Imports nothing from edgeinf."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class Layout(str, enum.Enum):
    """Memory order of an image-like tensor."""

    NHWC = "NHWC"
    NCHW = "NCHW"
    OTHER = "OTHER"


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: ``real = scale * (q - zero_point)``.

    Per-tensor quantization has one scale and one zero point; per-channel has one
    of each per index of ``axis``.
    """

    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1

    @property
    def scale(self) -> float:
        """The per-tensor scale (raises for per-channel quantization)."""
        if self.per_channel:
            raise ValueError(f"per-channel quantization over axis {self.axis} has {len(self.scales)} scales, not one")
        return self.scales[0]

    @property
    def zero_point(self) -> int:
        """The per-tensor zero point (raises for per-channel quantization)."""
        if self.per_channel:
            raise ValueError(
                f"per-channel quantization over axis {self.axis} has {len(self.zero_points)} zero points, not one"
            )
        return self.zero_points[0]

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """Return ``scale * (q - zero_point)`` as float32, per channel where needed."""
        scales = np.asarray(self.scales, dtype=np.float32)
        zeros = np.asarray(self.zero_points, dtype=np.float32)
        if self.per_channel:
            shape = [1] * q.ndim
            shape[self.axis] = -1
            scales, zeros = scales.reshape(shape), zeros.reshape(shape)
        return ((q.astype(np.float32) - zeros) * scales).astype(np.float32, copy=False)


@dataclass(frozen=True)
class TensorSpec:
    """What a model expects or produces at one input or output.

    Attributes:
        name: the tensor's name in the model (TFLite tensor name, NCNN blob name).
        shape: the static shape; -1 marks a dimension known only at run time.
        dtype: numpy dtype of the elements.
        layout: NHWC (TFLite images), NCHW (NCNN images) or OTHER.
        quantization: affine parameters of integer tensors, else None.
        index: the runtime's own handle for the tensor.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    layout: Layout = Layout.OTHER
    quantization: Quantization | None = None
    index: int = -1

    @property
    def size(self) -> int:
        return int(np.prod([d for d in self.shape if d > 0], dtype=np.int64))

    def describe(self) -> str:
        q = ""
        if self.quantization is not None:
            qq = self.quantization
            q = (
                f" q(scale={qq.scales[0]:.6g}, zero_point={qq.zero_points[0]})"
                if not qq.per_channel
                else f" q(per-channel axis {qq.axis}, {len(qq.scales)} scales)"
            )
        return f"{self.name}: {list(self.shape)} {np.dtype(self.dtype).name} {self.layout.value}{q}"
