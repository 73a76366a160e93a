"""The contract every runtime backend fulfils. Backends never import each other or `power`."""

from __future__ import annotations

import abc

import numpy as np

from ..errors import RuntimeFailure
from ..types import TensorSpec


class Backend(abc.ABC):
    """One loaded model on one runtime.

    A backend is not thread-safe: `Model` serializes calls to it.

    Attributes:
        name: short backend name (``"tflite"``, ``"ncnn"``).
        runtime: the runtime package and version that runs the model.
        delegate: the accelerator or delegate that took (part of) the graph, or None.
        num_threads: threads the runtime was configured with.
        inputs, outputs: tensor specs in the model's order.
        details: backend facts worth reporting (delegated partitions, options).
        takes_unbatched: whether an input of shape ``(1, *rest)`` also takes an array of
            shape ``rest`` (NCNN's CHW images); `Model` adds the batch axis for it.
    """

    name: str = ""
    runtime: str = ""
    delegate: str | None = None
    num_threads: int = 1
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    takes_unbatched: bool = False

    def __init__(self) -> None:
        self.details: dict[str, object] = {}

    @abc.abstractmethod
    def set_input(self, i: int, array: np.ndarray) -> None:
        """Copy an already validated array into input ``i``."""

    @abc.abstractmethod
    def input_buffer(self, i: int) -> np.ndarray:
        """A writable array whose contents the next `invoke` reads."""

    @abc.abstractmethod
    def invoke(self) -> list[np.ndarray]:
        """Run on the current inputs; return outputs in spec order (arrays the caller owns)."""

    @abc.abstractmethod
    def resize_input(self, i: int, shape: tuple[int, ...]) -> None:
        """Fix the shape of input ``i`` (dynamic dimensions); specs are refreshed."""

    def close(self) -> None:  # noqa: B027 - a no-op default is the intended behaviour
        """Release the runtime's resources."""


class OwnedInputsBackend(Backend):
    """A backend whose runtime takes its inputs at invoke time (NCNN, ONNX Runtime): the
    inputs live in arrays the backend owns, one per input, shaped by the spec.

    `set_input` copies: the caller's array is never kept, so a later write to it (or a
    runtime that works in place) cannot change what the next `invoke` reads.
    """

    def _init_inputs(self) -> None:
        self._buffers: list[np.ndarray | None] = [None] * len(self.inputs)

    def set_input(self, i: int, array: np.ndarray) -> None:
        buffer = self._buffers[i]
        if buffer is None or buffer.shape != array.shape:
            buffer = self._buffers[i] = np.empty(array.shape, self.inputs[i].dtype)
        np.copyto(buffer, array)

    def input_buffer(self, i: int) -> np.ndarray:
        spec = self.inputs[i]
        if any(d < 0 for d in spec.shape):
            raise RuntimeFailure(
                f"input {spec.name!r} has dynamic shape {list(spec.shape)}: call Model.resize_input() first"
            )
        buffer = self._buffers[i]
        if buffer is None or buffer.shape != spec.shape:
            buffer = self._buffers[i] = np.zeros(spec.shape, spec.dtype)
        return buffer

    def resize_input(self, i: int, shape: tuple[int, ...]) -> None:
        spec = self.inputs[i]
        inputs = list(self.inputs)
        inputs[i] = TensorSpec(spec.name, tuple(shape), spec.dtype, spec.layout, spec.quantization, spec.index)
        self.inputs = tuple(inputs)
        self._buffers[i] = None

    def _fed_inputs(self) -> list[tuple[TensorSpec, np.ndarray]]:
        """Each input's spec and array, for `invoke`."""
        fed = []
        for spec, array in zip(self.inputs, self._buffers):
            if array is None:
                raise RuntimeFailure(f"input {spec.name!r} was never set")
            fed.append((spec, array))
        return fed
