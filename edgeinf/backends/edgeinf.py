"""The int8 engine backend: a fully quantized .tflite model on edgeinf's own kernels.

The graph is planned once (`edgeinf.engine.plan_model`) and run by one native Program;
inputs and outputs are views of its arena, so `input_buffer` is zero copy. Models the
engine cannot run exactly raise `UnsupportedOperatorError` here; `backends.create` then
loads them on LiteRT and reports why in ``details["fallback"]``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from ..errors import RuntimeFailure
from ..types import Layout, Quantization, TensorSpec
from .base import Backend

if TYPE_CHECKING:
    from .. import _C

log = logging.getLogger(__name__)


def _spec(tensor) -> TensorSpec:
    q = tensor.quantization
    quantization = None
    if q is not None and q.scales:
        quantization = Quantization(
            scales=tuple(float(s) for s in q.scales),
            zero_points=tuple(int(z) for z in q.zero_points) or (0,) * len(q.scales),
            axis=int(q.quantized_dimension),
        )
    shape = tuple(int(d) for d in tensor.shape)
    return TensorSpec(
        name=tensor.name,
        shape=shape,
        dtype=tensor.numpy_dtype,
        layout=Layout.NHWC if len(shape) == 4 else Layout.OTHER,
        quantization=quantization,
        index=tensor.index,
    )


class EngineBackend(Backend):
    """A model on edgeinf's int8 engine.

    Args:
        parsed: the model as `edgeinf.formats.tflite.read_tflite` verified it.
        num_threads: threads of the engine (the caller's and persistent workers); large
            convolutions split their output rows, elementwise steps their values.

    Raises:
        UnsupportedOperatorError: an operator or parameter the engine does not run exactly.
        ModelFileError: quantization parameters TFLite itself refuses.
    """

    name = "edgeinf"

    def __init__(self, parsed, *, num_threads: int):
        super().__init__()
        from .. import __version__
        from ..engine import build_program, plan_model
        from ..isa import active_isa

        plan = plan_model(parsed)
        self._program: _C.EngineProgram | None = build_program(plan, num_threads)
        self.runtime = f"edgeinf {__version__}"
        self.num_threads = num_threads
        tensors = plan.tensors
        self.inputs = tuple(_spec(tensors[t]) for t in plan.inputs)
        self.outputs = tuple(_spec(tensors[t]) for t in plan.outputs)
        view = self._program.view
        self._input_views = [view(plan.offsets[s.index], s.shape, s.dtype) for s in self.inputs]
        self._output_views = [view(plan.offsets[s.index], s.shape, s.dtype) for s in self.outputs]
        self.details.update(
            isa=active_isa(),
            plan=plan.summary(),
        )
        log.info("engine plan of %s: %s", parsed.path or "model", plan.summary())

    def set_input(self, i: int, array: np.ndarray) -> None:
        np.copyto(self._input_views[i], array, casting="no")

    def input_buffer(self, i: int) -> np.ndarray:
        return self._input_views[i]

    def invoke(self) -> list[np.ndarray]:
        if self._program is None:
            raise RuntimeFailure("the engine backend was closed")
        self._program.run()
        return [v.copy() for v in self._output_views]

    def resize_input(self, i: int, shape: tuple[int, ...]) -> None:
        raise RuntimeFailure(
            f"the int8 engine runs static shapes only; input {self.inputs[i].name!r} cannot be resized"
        )

    def close(self) -> None:
        self._input_views = self._output_views = []
        self._program = None
