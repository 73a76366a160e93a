"""Pipelines from a small TOML file.

::

    [pipeline]
    name = "face_mesh"
    timeout_s = 1.0                 # the frame's deadline (optional)
    pacing = true                   # admit a frame once it passes every stage unqueued (default false)

    [[stage]]
    name = "faces"
    factory = "edgeinf.pipeline.face:detection_stage"   # module:callable returning the stage's fn
    options = { model = "face_detection_short_range", num_threads = 1 }

    [[stage]]
    name = "landmarks"
    factory = "edgeinf.pipeline.face:landmark_stage"
    inputs = ["faces"]
    for_each = "faces"
    process = true                  # in a child process, frames through shared memory
    timeout_s = 0.5

A stage with ``inline = true`` runs on the thread of its last input (see `Pipeline.add`).
A stage on threads with ``workers = N`` (N > 1) gets one callable per worker thread, each
built there from the factory (`ThreadStage`): N calls run at once, each with its own models.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError
from ..tomlfile import parse_toml
from .breaker import CircuitBreaker
from .core import Pipeline, ThreadStage
from .process import ProcessStage

MAX_CONFIG_BYTES = 1 << 20
_NUMBER = (int, float)
_TYPES = {
    "name": (str,), "factory": (str,), "args": (list,), "options": (dict,), "inputs": (list,),
    "for_each": (str,), "timeout_s": _NUMBER, "workers": (int,), "rate_hz": _NUMBER, "process": (bool,),
    "breaker_failures": (int,), "breaker_reset_s": _NUMBER, "frame_bytes": (int,), "output_bytes": (int,),
    "max_in_flight": (int,), "inline": (bool,), "pacing": (bool,),
}  # fmt: skip
_PIPELINE_KEYS = {"name", "timeout_s", "max_in_flight", "pacing"}
_STAGE_KEYS = {
    "name", "factory", "args", "options", "inputs", "for_each", "timeout_s", "workers", "rate_hz", "process",
    "breaker_failures", "breaker_reset_s", "frame_bytes", "output_bytes", "inline",
}  # fmt: skip


def load_pipeline(path: str | Path) -> Pipeline:
    """Build the `Pipeline` a TOML file describes.

    Raises:
        InputError: a missing or malformed file, an unknown key (named), a factory that
            cannot be imported, or a stage the pipeline refuses.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"pipeline file not found: {path}")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise InputError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes: not a pipeline file")
    data = parse_toml(path.read_text(encoding="utf-8"), path, "a pipeline file")
    unknown = set(data) - {"pipeline", "stage"}
    if unknown:
        raise InputError(f"{path}: unknown table(s) {sorted(unknown)}; expected [pipeline] and [[stage]]")
    settings = data.get("pipeline", {})
    _known(settings, _PIPELINE_KEYS, f"{path} [pipeline]")
    stages = data.get("stage", [])
    if not isinstance(stages, list) or not stages:
        raise InputError(f"{path}: expected at least one [[stage]] table")
    pipe = Pipeline(
        str(settings.get("name", path.stem)),
        timeout_s=settings.get("timeout_s"),
        max_in_flight=settings.get("max_in_flight"),
        pacing=settings.get("pacing", False),
    )
    for i, stage in enumerate(stages):
        where = f"{path} stage {i + 1}"
        _known(stage, _STAGE_KEYS, where)
        for key in ("name", "factory"):
            if key not in stage:
                raise InputError(f'{where}: needs {key} = "..."')
        args, options = stage.get("args", []), stage.get("options", {})
        try:
            breaker = CircuitBreaker(stage.get("breaker_failures", 3), stage.get("breaker_reset_s", 5.0))
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
        fn: Callable
        if stage.get("process", False):
            sizes = {k: stage[k] for k in ("frame_bytes", "output_bytes") if k in stage}
            fn = ProcessStage(stage["factory"], *args, options=options, **sizes)
        elif stage.get("workers", 1) > 1:  # a Model serves one call at a time: one callable per worker
            fn = ThreadStage(_factory(stage["factory"], where), *args, options=options)
        else:
            fn = _factory(stage["factory"], where)(*args, **options)
        pipe.add(
            stage["name"],
            fn,
            inputs=stage.get("inputs", ()),
            for_each=stage.get("for_each"),
            timeout_s=stage.get("timeout_s"),
            workers=stage.get("workers", 1),
            breaker=breaker,
            rate_hz=stage.get("rate_hz"),
            inline=stage.get("inline", False),
        )
    return pipe


def _known(table, keys: set, where: str) -> None:
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table, got {type(table).__name__}")
    unknown = set(table) - keys
    if unknown:
        raise InputError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(keys)}")
    for key, value in table.items():
        types = _TYPES.get(key)
        if types and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            expected = " or ".join(t.__name__ for t in types)
            raise InputError(f"{where}: {key} must be {expected}, got {value!r}")
    if not all(isinstance(i, str) for i in table.get("inputs", [])):
        raise InputError(f"{where}: inputs must be a list of stage names, got {table['inputs']!r}")


def _factory(spec: str, where: str):
    module, sep, name = spec.partition(":")
    if not sep:
        raise InputError(f"{where}: factory must be 'module:callable', got {spec!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"{where}: cannot import {spec!r}: {exc}") from None
