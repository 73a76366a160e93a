"""``backend="auto"`` for a .tflite model: the int8 engine when it runs the whole model and
is measured faster on this CPU, LiteRT otherwise.

The measure is a timed probe of the model itself at its first load: after one warm-up run
each, the engine and LiteRT (with XNNPACK) alternate timed runs on zero inputs until
`PROBE_BUDGET_S` has passed or `PROBE_RUNS` each are done; the engine wins when its median
beats LiteRT's by `MARGIN`. The decision is cached under the edgeinf cache dir, keyed by
the model's bytes, the CPU (model, cores, ISA features), the kernel path, the thread count
and the edgeinf and LiteRT versions, so later loads decide without measuring. Either way
``model.details["auto"]`` says what was chosen and why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import time
from pathlib import Path

log = logging.getLogger(__name__)

PROBE_RUNS = 5
PROBE_BUDGET_S = 0.05
MARGIN = 1.05
"""The engine must be this much faster than LiteRT to be chosen (timing noise aside)."""


def decide(engine_seconds: list[float], litert_seconds: list[float]) -> tuple[str, str]:
    """``("edgeinf" | "tflite", why)`` from the probe's run times of each contender."""
    if not engine_seconds or not litert_seconds:
        raise ValueError("the probe needs at least one run of each contender")
    engine, litert = statistics.median(engine_seconds), statistics.median(litert_seconds)
    runs = f"median of {len(engine_seconds)} and {len(litert_seconds)} runs"
    measured = f"engine {engine * 1e3:.3g} ms, LiteRT {litert * 1e3:.3g} ms ({runs})"
    if engine * MARGIN <= litert:
        return "edgeinf", f"the int8 engine is faster on this CPU: {measured}"
    return "tflite", f"LiteRT is as fast or faster on this CPU: {measured}"


def probe(engine, litert) -> tuple[list[float], list[float]]:
    """Run times of the two backends on zero inputs, alternating, within the budget."""
    import numpy as np

    for backend in (engine, litert):
        for i, spec in enumerate(backend.inputs):
            backend.set_input(i, np.zeros(spec.shape, spec.dtype))
        backend.invoke()  # warm-up: first-touch of the arena, XNNPACK's lazy setup
    times: tuple[list[float], list[float]] = ([], [])
    deadline = time.perf_counter() + PROBE_BUDGET_S
    while len(times[0]) < PROBE_RUNS and (not times[0] or time.perf_counter() < deadline):
        for backend, seconds in zip((engine, litert), times):
            start = time.perf_counter()
            backend.invoke()
            seconds.append(time.perf_counter() - start)
    return times


def _litert_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from . import installed_package

    package = installed_package("tflite") or "none"
    try:
        return f"{package} {version(package.replace('_', '-'))}"
    except PackageNotFoundError:
        return package


def _cache_file(data: bytes, num_threads: int) -> Path:
    from .. import __version__, board, isa
    from ..config import cache_dir

    key = json.dumps(
        [hashlib.sha256(data).hexdigest(), board.identify().summary(), isa.active_isa(), num_threads,
         __version__, _litert_version()]
    )  # fmt: skip
    return cache_dir() / "auto" / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def _read_cached(path: Path) -> tuple[str, str] | None:
    try:
        record = json.loads(path.read_text())
        choice, why = record["backend"], record["why"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (choice, why) if choice in ("edgeinf", "tflite") and isinstance(why, str) else None


def _write_cached(path: Path, choice: str, why: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # processes loading the same model write their own
        tmp.write_text(json.dumps({"backend": choice, "why": why}))
        tmp.replace(path)
    except OSError as exc:  # a read-only cache costs a probe per load, nothing else
        log.info("cannot cache the auto backend choice in %s: %s", path, exc)


_INT8_COMPUTE = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})


def has_int8_compute(parsed) -> bool:
    """Whether a convolution or fully connected layer of the main graph takes int8/uint8
    input: without one the engine has nothing to gain, and is not even tried."""
    graph = parsed.main
    return any(
        op.opcode.name in _INT8_COMPUTE and op.inputs and graph.tensors[op.inputs[0]].dtype in ("INT8", "UINT8")
        for op in graph.operators
    )


def create_auto(path, data: bytes | None, parsed, *, num_threads: int):
    """The backend ``backend="auto"`` chooses for a .tflite model, ``details["auto"]`` saying
    why. ``data``: the model's bytes when it was given as content rather than a file."""
    from ..errors import ModelFileError, UnsupportedOperatorError
    from . import create

    def litert():
        if data is None:
            return create("tflite", path, num_threads=num_threads)
        return create("tflite", path, num_threads=num_threads, model_content=data)

    def chosen(runtime, choice: str, why: str):
        runtime.details["auto"] = f"{'the int8 engine' if choice == 'edgeinf' else 'LiteRT'}: {why}"
        log.info("auto backend for %s: %s", path, runtime.details["auto"])
        return runtime

    if not has_int8_compute(parsed):
        return chosen(litert(), "tflite", "no int8 convolution or fully connected layer for the int8 engine to run")
    from .edgeinf import EngineBackend

    if data is None:
        data = Path(path).read_bytes()
    cache = _cache_file(data, num_threads)
    cached = _read_cached(cache)
    if cached is not None and cached[0] == "tflite":
        return chosen(litert(), "tflite", f"{cached[1]} (measured at an earlier load, cached in {cache})")
    try:
        engine = EngineBackend(parsed, num_threads=num_threads)
    except (UnsupportedOperatorError, ModelFileError, ValueError) as exc:  # ValueError: the native side refused
        return chosen(litert(), "tflite", f"the int8 engine does not run the whole model ({exc})")
    if cached is not None:
        return chosen(engine, "edgeinf", f"{cached[1]} (measured at an earlier load, cached in {cache})")
    runtime = litert()
    try:
        choice, why = decide(*probe(engine, runtime))
    except Exception:
        engine.close()
        runtime.close()
        raise
    _write_cached(cache, choice, why)
    loser, winner = (runtime, engine) if choice == "edgeinf" else (engine, runtime)
    loser.close()
    return chosen(winner, choice, why)
