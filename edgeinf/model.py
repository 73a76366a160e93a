"""`edgeinf.load` and `Model`: one object over TFLite, NCNN and ONNX Runtime.

Loading is a fixed sequence: recognise the file, verify its structure with edgeinf's own
reader (so no file can crash the runtime), check every operator against the chosen
runtime (unless ``check=False``), then hand the verified bytes to the runtime.

Thread policy: a `Model` serializes calls with a lock held from the moment an input is
written until the outputs are read (``run``, ``run_image``; ``input_buffer`` and ``invoke``
inside ``with model.exclusive():``), so it is safe to share between threads; for parallel
throughput load one `Model` per thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from . import backends
from .errors import (
    BackendUnavailableError,
    InputError,
    ModelClosedError,
    ModelFileError,
    RuntimeFailure,
    UnsupportedOperatorError,
)
from .metrics import LATENCY_BUCKETS_S, ModelMetrics
from .types import TensorSpec

if TYPE_CHECKING:  # asyncio and concurrent.futures load only for an app that submits calls
    from concurrent.futures import Future, ThreadPoolExecutor

    from .preprocess import ImageOutputs, Letterbox

log = logging.getLogger(__name__)
_clock = time.perf_counter
_thread_id = threading.get_ident

MAX_THREADS = 256
"""More runtime threads than any board has cores; beyond it a runtime may fail to start them
(TFLite crashes the process when thread creation fails)."""

MAX_INPUT_BYTES = 512 << 20
"""Default bound on the bytes of one input whose shape is chosen at run time (dynamic
dimensions): larger requests raise `InputError` before the runtime allocates anything.
An 8K RGB float32 frame (398 MB) fits. Raise it per model with ``model.max_input_bytes``."""

Inputs = Union[np.ndarray, Sequence[np.ndarray], Mapping[str, np.ndarray]]
_SUFFIX_KIND = {".tflite": "tflite", ".param": "ncnn", ".onnx": "onnx"}


def default_threads() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def model_kind(path: Path) -> str:
    """``"tflite"``, ``"ncnn"`` or ``"onnx"`` from the suffix, confirmed by the file's first bytes.

    Raises:
        ModelFileError: missing, a directory, empty, or not a model edgeinf knows.
    """
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    if path.is_dir():
        raise ModelFileError(f"expected a model file, got a directory: {path}")
    size = path.stat().st_size
    if size == 0:
        raise ModelFileError(f"model file is empty (0 bytes): {path}")
    with open(path, "rb") as f:
        head = f.read(16)
    sniffed = None
    if len(head) >= 8 and head[4:8] == b"TFL3":
        sniffed = "tflite"
    elif head.lstrip().startswith(b"7767517"):
        sniffed = "ncnn"
    kind = _SUFFIX_KIND.get(path.suffix.lower())
    if kind is None and sniffed is None:
        raise ModelFileError(
            f"expected a .tflite, an NCNN .param (with its .bin) or an .onnx model, got {path.name!r} "
            f"(suffix {path.suffix or 'none'}, first bytes {head[:8]!r})"
        )
    if kind and sniffed and kind != sniffed:
        raise ModelFileError(f"{path.name} has the suffix of a {kind} model but its bytes are a {sniffed} model")
    if kind == "tflite" and sniffed is None:
        raise ModelFileError(
            f"{path.name} is not a TFLite flatbuffer: expected the identifier b'TFL3' at bytes 4..8, "
            f"got {head[4:8]!r} ({size} bytes)"
        )
    if kind == "ncnn" and sniffed is None:
        raise ModelFileError(f"{path.name} is not an NCNN .param: expected the magic 7767517 first, got {head[:8]!r}")
    found = kind or sniffed
    assert found is not None  # both None was refused above
    return found


def _resolve_backend(backend, kind: str) -> str:
    """The first backend of the preference that runs ``kind`` and is installed."""
    if backend in (None, "auto"):
        preference = tuple(b for b in backends.automatic() if kind in backends.kinds_of(b))
    elif isinstance(backend, str):
        preference = (backend,)
    else:
        preference = tuple(backend)
    unknown = [b for b in preference if b not in backends.known()]
    if unknown:
        raise InputError(f"unknown backend {unknown[0]!r}: expected 'auto' or one of {list(backends.known())}")
    fitting = [b for b in preference if kind in backends.kinds_of(b)]
    if not fitting:
        raise ModelFileError(f"a {kind} model cannot run on backend(s) {list(preference)}")
    for name in fitting:
        if backends.installed_package(name):
            return name
    raise BackendUnavailableError(
        f"no installed runtime for this {kind} model: wanted {fitting} (pip install 'edgeinf[{backends.extra_of(fitting[0])}]'); "
        f"installed backends: {list(backends.available()) or 'none'}",
        requested=tuple(fitting),
        available=backends.available(),
    )


def _verify(path: Path, kind: str):
    """Read and verify the model's structure; returns the parsed model and, for TFLite and
    ONNX (without external data), its bytes.

    The runtime then runs on those same bytes (it keeps a reference, no copy),
    so the weights are in memory once, as when the runtime maps the file itself.
    """
    if kind == "tflite":
        from .formats.tflite import read_tflite

        data = path.read_bytes()
        return read_tflite(data, name=path), data
    if kind == "onnx":
        from .formats.onnx import read_onnx

        data = path.read_bytes()
        parsed = read_onnx(data, name=path)  # also finds external data beside the file
        return parsed, (None if parsed.has_external_data else data)
    from .formats.ncnn_param import read_ncnn_param

    return read_ncnn_param(path), None  # also checks the .bin against the weights the params imply


def resolve_path(model: str | os.PathLike) -> Path:
    """The file behind ``model``: an existing path, else a name from the model manifest.

    A manifest name (``edgeinf.zoo.names()``, e.g. ``"face_detection_short_range"``) that
    is not also a path resolves to the cached file, fetched from the registry if needed.

    Raises:
        FetchError: a manifest name whose download or checksum failed.
    """
    path = Path(model)
    if isinstance(model, str) and not path.exists():
        from . import zoo

        if model in zoo.names():
            return zoo.path(model)
    return path


def _check_options(backend: str, options: Mapping[str, object]) -> None:
    accepted = backends.options_of(backend)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(
            f"unknown option(s) {unknown} for the {backend} backend; load() takes path, backend, num_threads, "
            f"check and the {backend} options {list(accepted)}"
        )
    package = options.get("package")
    if package is not None and package not in backends.packages_of(backend):
        raise InputError(
            f"the {backend} package option must be one of {list(backends.packages_of(backend))}, got {package!r}"
        )


def load(
    path: str | os.PathLike,
    backend: str | Sequence[str] = "auto",
    num_threads: int | None = None,
    check: bool = True,
    **options,
) -> Model:
    """Load a model on the fastest correct runtime path.

    Args:
        path: a ``.tflite`` file, an NCNN ``.param`` with its ``.bin`` beside it, an ``.onnx``
            file, or a name from the model manifest (``edgeinf.zoo.names()``), fetched if not cached.
        backend: ``"auto"``, ``"tflite"``, ``"ncnn"``, ``"onnxruntime"``, ``"edgeinf"`` (the int8 engine, which
            runs what it cannot run exactly on LiteRT instead; see docs/engine.md), or an
            ordered preference list. ``"auto"`` takes the int8 engine for a .tflite model it
            runs whole when a timed probe at the first load (cached) finds it faster on this
            CPU, LiteRT otherwise (``EDGEINF_BACKENDS`` puts named backends first);
            ``details["auto"]`` says why.
        num_threads: runtime threads; default: the cores this process may use.
        check: run the operator compatibility check first and refuse a model that cannot run.
        **options: backend keywords: TFLite ``package``, ``xnnpack``, ``reference``;
            NCNN ``fp16``, ``light_mode``, ``vulkan``; ONNX Runtime ``optimization``
            (``"disable"``, ``"basic"``, ``"extended"``, ``"layout"``, ``"all"``); edgeinf ``xnnpack``, ``reference``
            (for its LiteRT fallback).

    Returns:
        A ready `Model`. ``model.details["load_peak_rss_bytes"]`` is the process's peak
        resident memory while it loaded: load() restarts the kernel's peak count (VmHWM)
        to measure it on Linux; elsewhere it is the process-lifetime peak.

    Raises:
        ModelFileError: missing, empty, corrupt, truncated or unknown model file.
        BackendUnavailableError: no installed runtime can run this kind of model.
        UnsupportedOperatorError: the check found operators the runtime cannot run
            (``err.report`` has every one of them).
        InputError: an unknown backend or option, or a bad ``num_threads``.
        FetchError: a manifest name that could not be fetched.

    >>> model = edgeinf.load("face_detection_short_range", num_threads=1)  # doctest: +SKIP
    >>> model.inputs[0].shape                                              # doctest: +SKIP
    (1, 128, 128, 3)
    """
    from .memory import peak_rss_bytes, reset_peak_rss

    path = resolve_path(path)
    kind = model_kind(path)
    name = _resolve_backend(backend, kind)
    _check_options(name, options)
    if num_threads is None:
        num_threads = default_threads()
    elif not isinstance(num_threads, int) or isinstance(num_threads, bool) or not 1 <= num_threads <= MAX_THREADS:
        raise InputError(f"num_threads must be an int from 1 to {MAX_THREADS}, got {num_threads!r}")
    reset_peak_rss()  # the peak this load reaches, not one from earlier work in the process
    parsed, data = _verify(path, kind)
    report = None
    if check:
        from .compat import check as compat_check

        # Check against the runtime that will really run it (a forced package included).
        checked, target = backends.checked_as(name, options)
        report = compat_check(path, backend=checked, target=target, model=parsed)
        if not report.runnable(checked):
            raise UnsupportedOperatorError(f"{path.name} cannot run on {name}:\n{report.to_text()}", report=report)
    if backend in (None, "auto") and backends.measures_auto(name, options):
        name = "auto"  # the int8 engine or LiteRT, whichever a timed probe finds faster
    if data is not None:
        options["model_content"] = data
    runtime = backends.create(name, path, num_threads=num_threads, parsed=parsed, **options)
    if report is not None and "delegate_nodes" in runtime.details:
        # the runtime's own placement is the truth: a wrong prediction is logged and corrected
        from .compat.delegation import reconcile

        predicted = [list(p) for p in report.backends["tflite"].partitions]
        report = reconcile(report, runtime.details["delegate_nodes"], runtime.runtime, parsed.main)
        runtime.details["predicted_delegate_nodes"] = predicted
    model = Model(runtime, path, parsed=parsed, report=report)
    model.load_peak_rss_bytes = peak_rss_bytes()
    return model


class Model:
    """A loaded model: its input and output specs, and `run`.

    Create with `edgeinf.load`. Safe to share between threads: ``run`` and ``run_image``
    hold the model from writing the input to reading the outputs; a thread that fills
    `input_buffer` itself holds it with `exclusive`. Every call is counted in
    ``model.metrics`` (calls, errors, a latency histogram and preprocess / inference /
    postprocess time; see `edgeinf.metrics`).

    >>> with edgeinf.load(path) as model:                        # doctest: +SKIP
    ...     scores = model.run(image)["classificators"]
    """

    def __init__(self, backend, path: Path, *, parsed=None, report=None):
        self._backend = backend
        self.path = path
        self.parsed = parsed
        self.report = report
        # Re-entrant: run_image and exclusive() hold it around calls that take it again.
        self._lock = threading.RLock()
        self.max_input_bytes = MAX_INPUT_BYTES
        self.load_peak_rss_bytes: int | None = None
        self._refresh_specs()
        # What each input accepts (-1: any size): specs show the size in use after a resize.
        self._accepted_shapes = tuple(spec.shape for spec in self.inputs)
        self._inputs_writer: int | None = None  # the thread that last wrote the inputs
        self.metrics = ModelMetrics(path.name, backend.name)
        self._call = _CallState()

    def _refresh_specs(self) -> None:
        self.inputs: tuple[TensorSpec, ...] = self._backend.inputs
        self.outputs: tuple[TensorSpec, ...] = self._backend.outputs
        self._input_names = {spec.name: i for i, spec in enumerate(self.inputs)}
        self._output_names = tuple(spec.name for spec in self.outputs)
        # Shape, dtype and C-contiguous strides of a static single input, for run()'s inline check.
        self._fast_input = None
        if len(self.inputs) == 1 and all(d > 0 for d in self.inputs[0].shape):
            spec = self.inputs[0]
            strides, step = [], spec.dtype.itemsize
            for d in reversed(spec.shape):
                strides.append(step)
                step *= d
            self._fast_input = (spec.shape, spec.dtype, tuple(reversed(strides)))

    # -- facts ---------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def runtime(self) -> str:
        return self._backend.runtime

    @property
    def delegate(self) -> str | None:
        return self._backend.delegate

    @property
    def num_threads(self) -> int:
        return self._backend.num_threads

    @property
    def details(self) -> dict:
        """Backend facts, and ``load_peak_rss_bytes``: the process's peak RSS while loading."""
        details = dict(self._live().details)
        details["load_peak_rss_bytes"] = self.load_peak_rss_bytes
        return details

    @property
    def closed(self) -> bool:
        return self._backend is None

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.runtime}, delegate={self.delegate}, threads={self.num_threads}"
        return f"<edgeinf.Model {self.path.name} on {state}>"

    # -- running -------------------------------------------------------------------
    def run(self, inputs: Inputs, *, dequantize: bool = False) -> dict[str, np.ndarray]:
        """Run the model.

        Args:
            inputs: one array (single-input models), a list in input order, or a dict
                by input name. Arrays must match the input's dtype and shape exactly
                (dynamic dimensions excepted) and be C-contiguous.
            dequantize: return int8/uint8 outputs as float32 ``scale * (q - zero_point)``.

        Returns:
            Outputs by name, as arrays the caller owns.

        Raises:
            InputError: wrong count, name, type, dtype, shape or memory layout.
        """
        try:
            # One array for a one-input model is the common case: skip the general arrangement.
            # (Any: the checks below narrow what the type checker cannot follow at no cost.)
            fast: Any = self._fast_input
            x: Any = inputs
            single = fast is not None and x.__class__ is np.ndarray
            arrays = (inputs,) if single else self._arrange(inputs)
            with self._lock:
                start = _clock()  # time holding the model: waiting for the lock is not the model's latency
                backend = self._backend or self._live()
                self._inputs_writer = _thread_id()
                if (
                    single
                    and x.shape == fast[0]
                    and (x.dtype is fast[1] or x.dtype == fast[1])
                    and x.strides == fast[2]  # the C-contiguous strides of that shape
                ):
                    backend.set_input(0, x)  # what _validate accepts first, checked inline
                else:
                    # Every input is checked (and a dynamic one resized) before any is written:
                    # a resize reallocates the runtime's tensors, losing inputs set before it.
                    for i, array in enumerate([self._validate(i, array) for i, array in enumerate(arrays)]):
                        backend.set_input(i, array)
                return self._invoke_and_record(backend, start, dequantize)
        except BaseException:
            self.metrics.errors += 1
            raise

    def input_buffer(self, i: int | str = 0) -> np.ndarray:
        """A writable array of input ``i`` that the next `invoke` reads.

        On TFLite it is the interpreter's own input memory (zero copy): fill it, drop
        every reference to it, then call `invoke`. Threads sharing the model hold it
        from the fill to the outputs::

            with model.exclusive():
                model.input_buffer()[...] = x
                outputs = model.invoke()

        Without that, an `invoke` whose inputs another thread wrote since this thread's
        `input_buffer` raises `RuntimeFailure` rather than run on them.
        """
        index = self._index(i)
        with self._lock:
            buffer = self._live().input_buffer(index)
            self._inputs_writer = _thread_id()
            self._call.filling = True
        return buffer

    def invoke(self, *, dequantize: bool = False) -> dict[str, np.ndarray]:
        """Run on what the input buffers hold (see `input_buffer`)."""
        call = self._call
        try:
            with self._lock:
                backend = self._live()
                if call.filling:
                    call.filling = False
                    if self._inputs_writer != _thread_id():
                        raise RuntimeFailure(
                            "another thread wrote this model's inputs between this thread's input_buffer() and "
                            "invoke(): hold `with model.exclusive():` around the fill and the invoke"
                        )
                return self._invoke_and_record(backend, None, dequantize)  # nothing filled: no preprocessing
        except BaseException:
            self.metrics.errors += 1
            raise

    @contextmanager
    def exclusive(self) -> Iterator[Model]:
        """Hold the model for a sequence of calls, e.g. `input_buffer` then `invoke`.

        Other threads' calls wait until the block ends. Calls inside it may nest.
        """
        with self._lock:
            yield self

    def resize_input(self, i: int | str, shape: Sequence[int]) -> None:
        """Fix the size of an input with dynamic dimensions (a later `run` may change it again).

        Raises:
            InputError: a shape the input does not accept, or larger than ``max_input_bytes``.
        """
        index = self._index(i)
        shape = tuple(int(d) for d in shape)
        with self._lock:
            self._check_resize(index, shape)
            self._resize(index, shape)

    def run_image(
        self, frame: np.ndarray, color: str = "bgr", roi: Sequence[int] | None = None, **options
    ) -> ImageOutputs:
        """Convert a camera frame into the input tensor in one native pass, then run.

        The model is held from the conversion to the outputs, so threads sharing it each
        get the result of their own frame. Float inputs need their normalization (``mean``
        and ``std``) unless the model's metadata states it; the options are those of
        `edgeinf.preprocess.Pipeline.for_input`. An input with dynamic dimensions is first
        resized to the converted frame's shape.

        Args:
            frame: uint8 image in format ``color``.
            color: rgb, bgr, rgba, bgra, gray, nv12, nv21, i420 or yuyv.
            roi: optional ``(x, y, width, height)`` source rectangle.
            **options: the other `Pipeline.for_input` options (resize, letterbox, mean, std,
                pad, channel_order, yuv_range, size, threads), and ``input``: the input to
                fill (index or name; the first by default).

        Returns:
            The outputs by name, with ``.letterbox`` (where this frame landed in the input,
            to map results back to the frame) and ``.roi`` (the source rectangle converted).

        Raises:
            InputError: a frame or option the conversion cannot take, naming what it expected.
        """
        from .preprocess import ImageOutputs, Pipeline

        try:
            index = self._index(options.pop("input", 0))
            with self._lock:
                start = _clock()
                backend = self._backend or self._live()
                pipe = Pipeline.for_model(self, frame, color, input_index=index, **options)
                letterbox = self._convert_image(backend, index, pipe, frame, roi)
                outputs = ImageOutputs(self._invoke_and_record(backend, start, False))
        except BaseException:
            self.metrics.errors += 1
            raise
        outputs.letterbox = letterbox
        return outputs

    def _convert_image(self, backend, index: int, pipe, frame: np.ndarray, roi) -> Letterbox:
        """Convert ``frame`` into input ``index`` (under the lock); the letterbox of the conversion."""
        shape = pipe.output_shape
        if self.inputs[index].shape not in (shape, shape[1:]):
            self._check_resize(index, shape)  # a dynamic input takes this frame's size (else InputError)
            self._resize(index, shape)
        self._inputs_writer = _thread_id()
        buffer = backend.input_buffer(index)
        if buffer.shape in (shape, shape[1:]):
            letterbox = pipe(frame, buffer, roi)
            del buffer  # TFLite refuses to invoke while a view of its input memory is alive
            return letterbox
        # The runtime's buffer does not have the pipeline's shape: convert, then copy in.
        del buffer
        converted = pipe.new_output()
        letterbox = pipe(frame, converted, roi)
        backend.set_input(index, self._validate(index, converted))
        return letterbox

    # -- futures -------------------------------------------------------------------
    def submit(self, inputs: Inputs, **options) -> Future:
        """`run` on the model's own worker thread; returns a `concurrent.futures.Future`.

        Calls run one at a time in submission order (one model runs one call at a time);
        the caller's thread is free meanwhile. ``submit_image`` does the same for `run_image`.

        >>> future = model.submit(x)                     # doctest: +SKIP
        >>> outputs = future.result(timeout=1.0)         # doctest: +SKIP
        """
        return self._submitter().submit(self.run, inputs, **options)

    def submit_image(self, frame: np.ndarray, color: str = "bgr", **options) -> Future:
        """`run_image` on the model's worker thread; returns a Future of the outputs."""
        return self._submitter().submit(self.run_image, frame, color, **options)

    async def arun(self, inputs: Inputs, **options) -> dict[str, np.ndarray]:
        """`run` for asyncio: awaits the outputs without blocking the event loop."""
        import asyncio

        return await asyncio.wrap_future(self.submit(inputs, **options))

    async def arun_image(self, frame: np.ndarray, color: str = "bgr", **options) -> dict[str, np.ndarray]:
        """`run_image` for asyncio."""
        import asyncio

        return await asyncio.wrap_future(self.submit_image(frame, color, **options))

    def _submitter(self) -> ThreadPoolExecutor:
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            self._live()
            executor = self.__dict__.get("_executor")
            if executor is None:
                executor = self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"edgeinf-{self.path.name}")
            return executor

    # -- lifetime ------------------------------------------------------------------
    def close(self) -> None:
        """Release the runtime. Further calls raise `ModelClosedError`. Idempotent."""
        executor = self.__dict__.pop("_executor", None)
        if executor is not None:
            executor.shutdown(wait=True)  # submitted calls finish first
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------------
    def _invoke_and_record(self, backend, start: float | None, dequantize: bool) -> dict[str, np.ndarray]:
        """Invoke on the inputs in place and book the call in ``self.metrics``.

        The one place a call's time is counted: ``start`` is when the caller began filling
        the inputs (checks and copy-in, or a frame's conversion; None for none), so stage 0
        is that, stage 1 the runtime and stage 2 naming (and dequantizing) the outputs. Called under
        ``self._lock``, so the plain list updates are race-free.
        """
        t_in = _clock()
        if start is None:
            start = t_in
        results = backend.invoke()
        t_out = _clock()
        named = self._name_outputs(results, True) if dequantize else dict(zip(self._output_names, results))
        end = _clock()
        m = self.metrics
        s = m.stage_s
        s[0] += t_in - start
        s[1] += t_out - t_in
        s[2] += end - t_out
        m.buckets[bisect_left(LATENCY_BUCKETS_S, end - start)] += 1
        return named

    def _live(self):
        if self._backend is None:
            raise ModelClosedError(f"model {self.path.name} was closed")
        return self._backend

    def _index(self, i: int | str) -> int:
        if isinstance(i, str):
            if i not in self._input_names:
                raise InputError(f"no input named {i!r}; inputs are {list(self._input_names)}")
            return self._input_names[i]
        if not 0 <= i < len(self.inputs):
            raise InputError(f"input index {i} out of range: the model has {len(self.inputs)} input(s)")
        return i

    def _arrange(self, inputs: Inputs) -> list:
        expected = len(self.inputs)
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - set(self._input_names))
            missing = [n for n in self._input_names if n not in inputs]
            if unknown or missing:
                raise InputError(
                    f"inputs by name must be exactly {list(self._input_names)}; missing {missing}, unexpected {unknown}"
                )
            return [inputs[spec.name] for spec in self.inputs]
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != expected:
                raise InputError(f"the model takes {expected} input(s), got a sequence of {len(inputs)}")
            return list(inputs)
        if expected != 1:
            raise InputError(f"the model takes {expected} inputs: pass a list or a dict by name, not one array")
        return [inputs]

    def _validate(self, i: int, array) -> np.ndarray:
        spec = self.inputs[i]
        if (
            array.__class__ is np.ndarray
            and array.shape == spec.shape
            and array.dtype == spec.dtype
            and array.flags.c_contiguous
        ):
            return array  # the common case, checked in the cheapest order; the rest explains what is wrong
        if not isinstance(array, np.ndarray):
            raise InputError(f"input {spec.name!r} must be a numpy array, got {type(array).__name__}")
        if array.dtype != spec.dtype:
            raise InputError(f"input {spec.name!r} expects dtype {spec.dtype.name}, got {array.dtype.name}")
        accepted = self._accepted_shapes[i]
        shape = array.shape
        if self._backend.takes_unbatched and len(shape) == len(accepted) - 1 and accepted[0] == 1:
            shape = (1, *shape)  # e.g. NCNN: a CHW image without the batch axis
            array = array.reshape(shape)
        if shape != spec.shape:
            self._check_resize(i, shape)
        if not array.flags.c_contiguous:
            raise InputError(
                f"input {spec.name!r} must be C-contiguous (got strides {array.strides}); pass np.ascontiguousarray(x)"
            )
        if shape != spec.shape:
            self._resize(i, shape)  # a new size for dynamic dimensions: the runtime reallocates once
        return array

    def _check_resize(self, i: int, shape: tuple[int, ...]) -> None:
        spec = self.inputs[i]
        accepted = self._accepted_shapes[i]
        if len(shape) != len(accepted) or any(a >= 0 and a != d for a, d in zip(accepted, shape)):
            raise InputError(f"input {spec.name!r} expects shape {list(accepted)}, got {list(shape)}")
        if any(d < 1 for d in shape):
            raise InputError(f"input {spec.name!r} needs every dimension >= 1, got {list(shape)}")
        nbytes = spec.dtype.itemsize
        for d in shape:
            nbytes *= d
        if nbytes > self.max_input_bytes:
            raise InputError(
                f"input {spec.name!r} of shape {list(shape)} would take {nbytes} bytes, more than the "
                f"model's max_input_bytes ({self.max_input_bytes}); raise model.max_input_bytes to allow it"
            )

    def _resize(self, i: int, shape: tuple[int, ...]) -> None:
        self._inputs_writer = _thread_id()  # a resize reallocates the inputs: an earlier fill is gone
        self._live().resize_input(i, shape)
        self._refresh_specs()

    def _name_outputs(self, results: list[np.ndarray], dequantize: bool) -> dict[str, np.ndarray]:
        if not dequantize:
            return dict(zip(self._output_names, results))
        named = {}
        for spec, value in zip(self.outputs, results):
            if dequantize and spec.quantization is not None and value.dtype in (np.int8, np.uint8, np.int16):
                value = spec.quantization.dequantize(value)
            named[spec.name] = value
        return named


class _CallState(threading.local):
    """Per-thread state between `Model.input_buffer` and `Model.invoke`."""

    filling: bool = False  # input_buffer() was called and invoke() has not run yet


def available_backends() -> tuple[str, ...]:
    """Backends whose runtime is installed here, in default preference order."""
    return backends.available()
