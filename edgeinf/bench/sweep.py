"""A model measured on a backend variant: load time, first call, latency statistics,
throughput with concurrent copies, and memory; with fixed random or real-image inputs."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..memory import peak_rss_bytes, reset_peak_rss, rss_bytes
from .stats import measure, summarize


def random_inputs(specs, seed: int = 0, shape: Sequence[int] | None = None) -> list[np.ndarray]:
    """One seeded random array per input: floats uniform in [-1, 1], integers over their full range.

    Args:
        shape: the first input's shape, for models whose input has dynamic dimensions.
    """
    rng = np.random.default_rng(seed)
    arrays = []
    for i, spec in enumerate(specs):
        shape_i = _concrete(spec, shape if i == 0 else None)
        if np.issubdtype(spec.dtype, np.floating):
            arrays.append(rng.uniform(-1.0, 1.0, shape_i).astype(spec.dtype))
        elif np.issubdtype(spec.dtype, np.integer):
            info = np.iinfo(spec.dtype)
            arrays.append(rng.integers(info.min, info.max, shape_i, endpoint=True, dtype=spec.dtype))
        else:
            raise ValueError(f"cannot make a random input of dtype {spec.dtype} for {spec.name!r}")
    return arrays


IMAGE_RANGES = {"-1,1": (-1.0, 1.0), "0,1": (0.0, 1.0), "0,255": (0.0, 255.0)}


def image_input(spec, image_path, value_range: str = "-1,1") -> np.ndarray:
    """A real image as input ``spec`` expects it: resized, channel order, layout, dtype.

    Float inputs get pixels mapped linearly to ``value_range``; quantized integer inputs
    get that float value quantized with the input's scale and zero point; integer inputs
    without quantization get raw pixels (uint8) or pixels - 128 (int8).
    """
    from PIL import Image

    if value_range not in IMAGE_RANGES:
        raise ValueError(f"value_range must be one of {list(IMAGE_RANGES)}, got {value_range!r}")
    shape = spec.shape
    if len(shape) != 4:
        raise ValueError(f"--image needs a 4-D image input, {spec.name!r} has shape {list(shape)}")
    nchw = spec.layout.value == "NCHW"
    channels, height, width = (shape[1], shape[2], shape[3]) if nchw else (shape[3], shape[1], shape[2])
    if channels not in (1, 3):
        raise ValueError(f"--image needs 1 or 3 channels, {spec.name!r} has {channels}")
    image = Image.open(image_path).convert("L" if channels == 1 else "RGB")
    if height > 0 and width > 0:
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    pixels = np.asarray(image, dtype=np.float32).reshape(image.height, image.width, channels)
    pixels = pixels.transpose(2, 0, 1) if nchw else pixels
    lo, hi = IMAGE_RANGES[value_range]
    real = pixels / 255.0 * (hi - lo) + lo
    dtype = spec.dtype
    if np.issubdtype(dtype, np.floating):
        out = real.astype(dtype)
    else:
        info = np.iinfo(dtype)
        if spec.quantization is not None and not spec.quantization.per_channel:
            q = np.round(real / spec.quantization.scale + spec.quantization.zero_point)
        else:
            q = pixels - 128.0 if dtype == np.int8 else pixels
        out = np.clip(q, info.min, info.max).astype(dtype)
    return np.ascontiguousarray(out[np.newaxis])


def _concrete(spec, shape: Sequence[int] | None = None) -> tuple[int, ...]:
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        fits = len(shape) == len(spec.shape) and all(d == s or s < 0 for d, s in zip(shape, spec.shape))
        if not fits or any(d < 1 for d in shape):
            raise ValueError(f"input {spec.name!r} has shape {list(spec.shape)}; cannot use shape {list(shape)}")
        return shape
    if any(d < 0 for d in spec.shape):
        raise ValueError(
            f"input {spec.name!r} has dynamic dimensions {list(spec.shape)}: give a shape (--shape), "
            "or an image (--image) for an image input"
        )
    return tuple(spec.shape)


# -- a model, measured ----------------------------------------------------------------------

VARIANTS: dict[str, tuple[str, dict]] = {
    "tflite": ("tflite", {}),
    "tflite-builtin": ("tflite", {"xnnpack": False}),
    "tflite-reference": ("tflite", {"reference": True}),
    "ncnn": ("ncnn", {}),
    "ncnn-fp32": ("ncnn", {"fp16": False}),
    "onnxruntime": ("onnxruntime", {}),
}
"""Backend variants a sweep can name: TFLite with XNNPACK (default), TFLite's built-in
kernels only, TFLite's reference kernels, NCNN (fp16 where supported), NCNN all-fp32 and
ONNX Runtime (CPU provider, every graph optimization)."""

SCHEMA = "edgeinf.bench/1"


def variant_fits(variant: str, path) -> bool:
    """Whether a backend variant runs this kind of model file (by suffix)."""
    backend = VARIANTS[variant][0]
    suffix = Path(path).suffix.lower()
    return {"tflite": ".tflite", "ncnn": ".param", "onnxruntime": ".onnx"}[backend] == suffix


def auto_variant(path) -> str:
    return {".param": "ncnn", ".onnx": "onnxruntime"}.get(Path(path).suffix.lower(), "tflite")


def bench_model(
    path,
    *,
    variant: str | None = None,
    threads: int = 1,
    concurrency: int = 1,
    runs: int = 100,
    warmup: int = 10,
    image=None,
    image_range: str = "-1,1",
    seed: int = 0,
    shape: Sequence[int] | None = None,
    check: bool = True,
    on_run: Callable[[int], object] | None = None,
) -> dict:
    """The measuring method on one model file and one configuration.

    Loads the model (timed), runs it once (the first inference, timed), ``warmup`` more
    times, then ``runs`` timed calls on a fixed input. With ``concurrency`` > 1, that
    many threads each load their own Model (the thread policy of `edgeinf.Model`) and
    run ``runs`` calls each at the same time; throughput is then calls over wall time.

    Returns:
        A result record (see docs/observe.md for the schema): configuration, load and
        first-inference times, latency statistics, throughput and memory.
    """
    from ..model import load

    variant = variant or auto_variant(path)
    if variant not in VARIANTS:
        raise ValueError(f"unknown backend variant {variant!r}: expected one of {list(VARIANTS)}")
    if concurrency < 1 or threads < 1:
        raise ValueError(f"threads and concurrency must be >= 1, got threads={threads}, concurrency={concurrency}")
    backend, options = VARIANTS[variant]
    gc.collect()
    peak_resettable = reset_peak_rss()
    rss_before = rss_bytes()
    start = time.perf_counter()
    models = [load(path, backend=backend, num_threads=threads, check=check, **options)]
    load_ms = (time.perf_counter() - start) * 1e3
    try:
        models += [
            load(path, backend=backend, num_threads=threads, check=check, **options) for _ in range(concurrency - 1)
        ]
        rss_loaded = rss_bytes()
        first = models[0]
        if image is not None:
            if len(first.inputs) != 1:
                raise ValueError(f"--image needs a one-input model, {Path(path).name} has {len(first.inputs)}")
            inputs = [image_input(first.inputs[0], image, image_range)]
        else:
            inputs = random_inputs(first.inputs, seed, shape)
        feed = inputs[0] if len(inputs) == 1 else inputs  # as a caller passes them: one array, or a list
        start = time.perf_counter()
        first.run(feed)
        first_ms = (time.perf_counter() - start) * 1e3
        if concurrency == 1:
            for _ in range(warmup):
                first.run(feed)
            rss_warm = rss_bytes()
            wall_start = time.perf_counter()
            stats = measure(lambda: first.run(feed), warmup=0, runs=runs, batch=1, on_run=on_run)
            wall_s = time.perf_counter() - wall_start
            total_calls = runs
            rss_after = rss_bytes()
        else:
            stats, wall_s, rss_warm = _concurrent(models, feed, warmup, runs, on_run)
            total_calls = runs * concurrency
            rss_after = rss_bytes()
        # The kernel's peak lags its RSS counters by a few pages: never report one under a sample.
        peak = max(peak_rss_bytes(), rss_before, rss_loaded, rss_warm, rss_after)
        record: dict[str, Any] = {
            "model": str(path),
            "model_name": Path(path).name,
            "variant": variant,
            "backend": first.backend,
            "runtime": first.runtime,
            "delegate": first.delegate,
            "threads": threads,
            "concurrency": concurrency,
            "input": f"image {image}" if image is not None else f"random seed={seed}",
            "input_shape": list(inputs[0].shape),
            "input_dtype": first.inputs[0].dtype.name,
            "warmup": warmup,
            "runs": runs,
            "load_ms": load_ms,
            "first_inference_ms": first_ms,
            "latency_us": {k: v for k, v in stats.to_dict().items() if k.endswith("_us")},
            "throughput_per_s": total_calls / wall_s if wall_s > 0 else float("inf"),
            "memory": {
                "rss_before_load_bytes": rss_before,
                "rss_after_load_bytes": rss_loaded,
                "rss_after_warmup_bytes": rss_warm,
                "rss_after_runs_bytes": rss_after,
                "peak_rss_bytes": peak,
                "growth_bytes": rss_after - rss_warm,
                "peak_is_per_run": peak_resettable,
            },
        }
        samples = stats.samples_us if stats.samples_us is not None else ()  # measure() always keeps them
        record["latency_us"]["samples"] = [float(t) for t in samples]
        return record
    finally:
        for model in models:
            model.close()


def _concurrent(models, inputs, warmup: int, runs: int, on_run):
    """``len(models)`` threads, one Model each, released together; per-call times pooled.

    Wall time runs from the first thread's first timed call to the last thread's last
    one, as each thread stamps them (the releasing thread may be descheduled).
    """
    n = len(models)
    warmed, go = threading.Barrier(n + 1), threading.Barrier(n + 1)
    times = [np.empty(runs) for _ in range(n)]
    spans = [[0.0, 0.0] for _ in range(n)]
    failures: list[BaseException] = []

    def work(k: int) -> None:
        model = models[k]
        try:
            for _ in range(warmup):
                model.run(inputs)
        except BaseException as exc:  # reported after the join, never lost in a thread
            failures.append(exc)
        warmed.wait()
        go.wait()
        if failures:
            return
        clock = time.perf_counter
        mine = times[k]
        try:
            spans[k][0] = clock()
            for i in range(runs):
                start = clock()
                model.run(inputs)
                mine[i] = clock() - start
                if k == 0 and on_run is not None:
                    on_run(i + 1)
            spans[k][1] = clock()
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=work, args=(k,), name=f"edgeinf-bench-{k}") for k in range(n)]
    for w in workers:
        w.start()
    warmed.wait()  # every thread has warmed up and waits: memory now is the warmed-up figure
    rss_warm = rss_bytes()
    go.wait()
    for w in workers:
        w.join()
    if failures:
        raise failures[0]
    wall_s = max(end for _, end in spans) - min(begin for begin, _ in spans)
    return summarize(np.concatenate(times) * 1e6), wall_s, rss_warm
