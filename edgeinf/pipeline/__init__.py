"""Multi-stage pipelines: detector -> crops -> per-crop model, on threads or processes.

>>> from edgeinf.pipeline import Pipeline                                # doctest: +SKIP
>>> pipe = Pipeline("faces", timeout_s=1.0)
>>> pipe.add("faces", detect)                                            # fn(frame)
>>> pipe.add("landmarks", landmarks, inputs=["faces"], for_each="faces", timeout_s=0.2)
>>> for result in pipe.run(edgeinf.sources.open("video.mp4")):
...     print(result.to_dict())

See docs/pipeline.md.
"""

from __future__ import annotations

from .breaker import CircuitBreaker
from .core import FrameResult, Pipeline, PipelineError, Stage, StageResult, ThreadStage, to_json
from .metrics import PipelineMetrics
from .process import ProcessStage

__all__ = [
    "CircuitBreaker",
    "FrameResult",
    "Pipeline",
    "PipelineError",
    "PipelineMetrics",
    "ProcessStage",
    "Stage",
    "StageResult",
    "ThreadStage",
    "to_json",
]
