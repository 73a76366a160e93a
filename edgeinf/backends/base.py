"""The contract every runtime backend fulfils. Backends never import each other or `power`."""

from __future__ import annotations

import abc

import numpy as np

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
    """

    name: str = ""
    runtime: str = ""
    delegate: str | None = None
    num_threads: int = 1
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()

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
