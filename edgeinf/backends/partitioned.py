"""A model split between the int8 engine and LiteRT: native segments on the engine's
Programs, the others on LiteRT interpreters of models cut to those segments
(`edgeinf.engine.partition`). One `invoke` runs the segments in order, handing the
tensors that cross from one to the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import RuntimeFailure
from .base import Backend
from .edgeinf import _spec

if TYPE_CHECKING:
    from .. import _C


class _NativeSegment:
    def __init__(self, model, segment, num_threads: int):
        from ..engine import build_program, plan_part

        plan = plan_part(model, segment.operators, segment.inputs, segment.outputs)
        program = build_program(plan, num_threads)
        self.program: _C.EngineProgram | None = program
        self.plan = plan

        def view(t: int) -> np.ndarray:
            spec = _spec(plan.tensors[t])
            return program.view(plan.offsets[t], spec.shape, spec.dtype)

        self.input_views = [view(t) for t in segment.inputs]
        self.output_views = [view(t) for t in segment.outputs]

    def run(self, values: list[np.ndarray]) -> list[np.ndarray]:
        for view, value in zip(self.input_views, values):
            np.copyto(view, value, casting="no")
        if self.program is None:
            raise RuntimeFailure("the engine segment was closed")
        self.program.run()
        return [v.copy() for v in self.output_views]

    def close(self) -> None:
        self.input_views = self.output_views = []
        self.program = None


class _LiteRTSegment:
    def __init__(self, path, data: bytes, segment, num_threads: int, options: dict):
        from ..engine import cut_model
        from .tflite import TFLiteBackend

        self.backend = TFLiteBackend(path, num_threads=num_threads, model_content=cut_model(data, segment), **options)

    def run(self, values: list[np.ndarray]) -> list[np.ndarray]:
        for i, value in enumerate(values):
            self.backend.set_input(i, value)
        return self.backend.invoke()

    def close(self) -> None:
        self.backend.close()


class PartitionedBackend(Backend):
    """A model whose native segments run on the engine and the rest on LiteRT.

    Args:
        path: the model file (for LiteRT's messages).
        data: the model's bytes, from which LiteRT's segments are cut.
        parsed: the model as `edgeinf.formats.tflite.read_tflite` verified it.
        support: `edgeinf.engine.node_support` of it.
        segments: `edgeinf.engine.partition` of it.
        options: LiteRT's options (``xnnpack``, ``reference``) for its segments.

    Raises:
        UnsupportedOperatorError, ModelFileError: a native segment the engine cannot plan.
        RuntimeFailure: LiteRT refuses a cut segment.
    """

    name = "edgeinf"

    def __init__(self, path, data: bytes, parsed, support, segments, *, num_threads: int, **options):
        super().__init__()
        from .. import __version__
        from ..isa import active_isa

        sg = parsed.main
        self._segments = segments
        self._runners: list[_NativeSegment | _LiteRTSegment] = []
        try:
            for segment in segments:
                if segment.native:
                    self._runners.append(_NativeSegment(parsed, segment, num_threads))
                else:
                    self._runners.append(_LiteRTSegment(path, data, segment, num_threads, options))
        except Exception:
            self.close()
            raise
        produced = {t for s in segments for t in s.outputs} | set(sg.inputs)
        missing = [t for t in sg.outputs if t not in produced]
        if missing:
            self.close()
            raise RuntimeFailure(f"model outputs {missing} come from no segment")
        litert = next(r.backend for r in self._runners if isinstance(r, _LiteRTSegment))
        self.runtime = f"edgeinf {__version__} + {litert.runtime}"
        self.delegate = litert.delegate
        self.num_threads = num_threads
        self.inputs = tuple(_spec(sg.tensors[t]) for t in sg.inputs)
        self.outputs = tuple(_spec(sg.tensors[t]) for t in sg.outputs)
        self._input_arrays = [np.zeros(s.shape, s.dtype) for s in self.inputs]
        fallback = {n.index: n.reason or "native, but in a LiteRT segment (data movement only)" for n in support
                    if not any(n.index in s.operators for s in segments if s.native)}  # fmt: skip
        self.details.update(
            isa=active_isa(),
            segments=[
                {"runtime": "edgeinf" if s.native else "tflite", "operators": list(s.operators)} for s in segments
            ],
            fallback_nodes=fallback,
            plans=[r.plan.summary() for r in self._runners if isinstance(r, _NativeSegment)],
        )

    def set_input(self, i: int, array: np.ndarray) -> None:
        np.copyto(self._input_arrays[i], array, casting="no")

    def input_buffer(self, i: int) -> np.ndarray:
        return self._input_arrays[i]

    def invoke(self) -> list[np.ndarray]:
        values = {spec.index: array for spec, array in zip(self.inputs, self._input_arrays)}
        for segment, runner in zip(self._segments, self._runners):
            results = runner.run([values[t] for t in segment.inputs])
            values.update(zip(segment.outputs, results))
        return [np.array(values[s.index], copy=True) for s in self.outputs]

    def resize_input(self, i: int, shape: tuple[int, ...]) -> None:
        raise RuntimeFailure(
            f"a model split between the engine and LiteRT runs static shapes only; input {self.inputs[i].name!r} "
            "cannot be resized"
        )

    def close(self) -> None:
        for runner in self._runners:
            runner.close()
        self._runners = []
        self._input_arrays = []
