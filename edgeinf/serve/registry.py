"""The served models: loading with checks and a probe, variant choice, reload and rollback.

A variant goes live only after its file matched its sha256 (when given), passed
`edgeinf.check` (through `edgeinf.load`), and answered probe requests; their median cost
(body decoding, model, answer encoding) sets the default deadline. A reload builds the new
variant beside the old one and swaps a single reference, so requests in flight finish on the
model they started on. The old variant stays loaded for the rollback window: a spike of
errors on the new one swaps it back.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, ModelFileError
from . import codecs
from .config import Limits, ModelConfig, Rollback, VariantConfig
from .workers import Pool

if TYPE_CHECKING:
    from ..ab import ABTest

log = logging.getLogger(__name__)

PROBE_RUNS = 5
PROBE_IMAGE_SIZE = (640, 480)


def default_loader(path: Path, config: ModelConfig):
    """`edgeinf.load` with the model's backend and threads; the operator check included."""
    from ..model import load

    return load(path, backend=config.backend, num_threads=config.threads, check=True)


def probe_input(model) -> list[np.ndarray]:
    """Zeros of each input's dtype and shape (a dynamic dimension taken as 1)."""
    return [np.zeros([d if d > 0 else 1 for d in spec.shape], dtype=spec.dtype) for spec in model.inputs]


def probe(model, image_options: dict) -> float:
    """What a request costs the server, in seconds: the slowest median over the body kinds.

    A JSON request is probed whole: its body parsed (the inputs in base64), the model run, the
    outputs encoded as lists. With image options, a 640x480 photo-like JPEG is decoded, goes
    through `Model.run_image` (so the options are checked before the variant serves) and its
    outputs are encoded. The deadline only times the wait for the model and the call, but on
    a small device the decoding and encoding of the requests around a call share its cores:
    a deadline from the model's time alone would be too tight under load.
    """
    kinds = [_json_request(model)]
    if image_options:
        kinds.append(_image_request(model, image_options))
    medians = []
    for request in kinds:
        request()  # the first call pays one-time allocation
        times = []
        for _ in range(PROBE_RUNS):
            start = time.perf_counter()
            request()
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return max(medians)


def _json_request(model) -> Callable[[], bytes]:
    rng = np.random.default_rng(0)
    tensors = []
    for array in probe_input(model):
        if array.dtype.kind == "f":
            values = rng.uniform(-1.0, 1.0, array.shape)
        elif array.dtype.kind in "iu":
            info = np.iinfo(array.dtype)
            values = rng.integers(info.min, info.max, array.shape, endpoint=True, dtype=array.dtype)
        else:
            values = rng.integers(0, 1, array.shape, endpoint=True).astype(array.dtype)
        raw = np.ascontiguousarray(values, dtype=array.dtype.newbyteorder("<")).tobytes()
        tensors.append({"shape": list(array.shape), "dtype": array.dtype.name, "b64": base64.b64encode(raw).decode()})
    if any(t["dtype"] not in codecs.DTYPES for t in tensors):  # no JSON form: time the model and the answer
        arrays = probe_input(model)
        return lambda: codecs.encode_answer(model.run(arrays), "list")
    body = json.dumps({"inputs": tensors}).encode()

    def request() -> bytes:
        inputs, options = codecs.decode_json_request(body, max_elements=len(body))
        return codecs.encode_answer(model.run(inputs, dequantize=options["dequantize"]), options["encoding"])

    return request


def _image_request(model, image_options: dict) -> Callable[[], bytes]:
    frame = _probe_frame()
    jpeg = _jpeg_of(frame)

    def request() -> bytes:
        if jpeg is None:  # neither Pillow nor OpenCV: the service takes no JPEG either
            decoded = frame
        else:
            decoded, _ = codecs.decode_image(jpeg, "jpeg", {}, max_pixels=frame.shape[0] * frame.shape[1])
        outputs = model.run_image(decoded, "rgb", **image_options)
        return codecs.encode_answer(outputs, "list")

    return request


def _probe_frame() -> np.ndarray:
    """A 640x480 RGB frame with a photo's mix of smooth areas and texture (JPEG cost is content-bound)."""
    width, height = PROBE_IMAGE_SIZE
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], axis=-1)
    noise = np.random.default_rng(0).integers(-24, 24, (height, width, 3), endpoint=True)
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def _jpeg_of(frame: np.ndarray) -> bytes | None:
    try:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, "JPEG", quality=90)
        return buffer.getvalue()
    except ImportError:
        pass
    try:
        import cv2
    except ImportError:
        return None
    ok, encoded = cv2.imencode(".jpg", np.ascontiguousarray(frame[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 90])
    return encoded.tobytes() if ok else None


@dataclass
class Variant:
    """A live variant: its config, file, digest, probe and workers."""

    config: VariantConfig
    path: Path
    sha256: str
    probe_p50_s: float
    pool: Pool
    specs: dict = field(default_factory=dict)
    loaded_at: float = field(default_factory=time.time)

    def describe(self) -> dict:
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "weight": self.config.weight,
            "compare": self.config.compare,
            "probe_p50_s": self.probe_p50_s,
            "deadline_s": self.pool.deadline_s,
            "workers": self.pool.live_workers,
            "loaded_at": self.loaded_at,
            **self.specs,
        }


def open_variant(model: ModelConfig, variant: VariantConfig, limits: Limits, loader: Callable) -> Variant:
    """Load, verify and probe a variant, and start its workers.

    Raises:
        ModelFileError: the file does not match its sha256 (or is missing or corrupt).
        UnsupportedOperatorError: `edgeinf.check` says it cannot run.
        EdgeInfError: the probe inference failed.
    """
    from ..model import resolve_path
    from ..zoo import sha256_of

    path = resolve_path(variant.path)
    if not path.is_file():
        raise ModelFileError(f"{model.name}/{variant.name}: no model file at {path}")
    digest = sha256_of(path)
    if variant.sha256 is not None and digest != variant.sha256.lower():
        raise ModelFileError(
            f"{model.name}/{variant.name}: {path} has sha256 {digest}, the config expects {variant.sha256}"
        )
    models = []
    try:
        for _ in range(model.workers):
            models.append(loader(path, model))
        p50 = probe(models[0], model.image)
        for extra in models[1:]:
            probe(extra, model.image)
    except BaseException:
        for m in models:
            m.close()
        raise
    deadline = model.deadline_s or max(limits.deadline_factor * p50, limits.min_deadline_s)
    name = f"{model.name}/{variant.name}"
    pool = Pool(
        name, lambda: _ready(loader(path, model), model.image), models, capacity=limits.queue, deadline_s=deadline
    )
    first = models[0]
    specs = {
        "inputs": [_spec(s) for s in first.inputs],
        "outputs": [_spec(s) for s in first.outputs],
        "backend": getattr(first, "backend", None),
        "runtime": getattr(first, "runtime", None),
    }
    log.info(
        "%s: %s (sha256 %s) loaded, probe p50 %.2f ms, deadline %.3f s", name, path, digest[:12], p50 * 1e3, deadline
    )
    return Variant(variant, path, digest, p50, pool, specs)


def _ready(loaded, image_options: dict):
    """A replacement worker's model, probed like the first ones before it takes requests."""
    try:
        probe(loaded, image_options)
    except BaseException:
        loaded.close()
        raise
    return loaded


def _spec(spec) -> dict:
    out = {"name": spec.name, "shape": list(spec.shape), "dtype": np.dtype(spec.dtype).name}
    layout = getattr(spec, "layout", None)
    if layout is not None:
        out["layout"] = getattr(layout, "value", str(layout))
    q = getattr(spec, "quantization", None)
    if q is not None and not getattr(q, "per_channel", False):
        out["quantization"] = {"scale": float(np.ravel(q.scale)[0]), "zero_point": int(np.ravel(q.zero_point)[0])}
    return out


class _PrimaryArm:
    """The A/B primary: the model of the worker thread making the call."""

    def __init__(self, model):
        self.local = threading.local()
        self.inputs, self.outputs = model.inputs, model.outputs

    def run(self, inputs, **kwargs):
        return self.local.model.run(inputs, **kwargs)

    def __call__(self, frame, **kwargs):
        return self.local.model.run_image(frame, **kwargs)


class _CandidateArm:
    """The A/B candidate: whichever model serves the compared variant now (reloads included)."""

    def __init__(self, entry: ModelEntry, variant: str):
        self.entry, self.variant = entry, variant

    def _model(self):
        return self.entry.variants[self.variant].pool.any_model()

    @property
    def inputs(self):
        return self._model().inputs

    @property
    def outputs(self):
        return self._model().outputs

    def run(self, inputs, **kwargs):
        return self._model().run(inputs, **kwargs)

    def __call__(self, frame, **kwargs):
        return self._model().run_image(frame, **kwargs)


class RollbackGuard:
    """Watches the variants a reload put in, until the window ends or errors spike."""

    def __init__(self, old: dict, new: dict, policy: Rollback):
        self.old, self.new, self.policy = old, new, policy
        self.until = time.monotonic() + policy.window_s
        self.requests = dict.fromkeys(new, 0)
        self.errors = dict.fromkeys(new, 0)

    def expired(self) -> bool:
        return time.monotonic() > self.until

    def record(self, variant: str, pool: Pool, failed: bool) -> bool:
        """Count one answer of the new ``pool``; True when the error rate calls for a rollback."""
        if variant not in self.new or self.new[variant].pool is not pool:
            return False
        self.requests[variant] += 1
        self.errors[variant] += failed
        n = self.requests[variant]
        return n >= self.policy.min_requests and self.errors[variant] / n > self.policy.error_rate


class ModelEntry:
    """One served model: its variants (swapped whole on reload) and how requests pick one."""

    def __init__(self, config: ModelConfig, variants: dict, seed: int | None = None):
        self.config = config
        self.variants: dict[str, Variant] = variants
        self.guard: RollbackGuard | None = None
        self.reloads = 0
        self.rollbacks = 0
        self._random = random.Random(seed)
        self.ab: ABTest | None = None
        self._attach_ab()

    @property
    def primary(self) -> str:
        return self.config.variants[0].name

    def pick(self, requested: str | None) -> str:
        """The variant a request runs on: the one it asked for, else a weighted draw.

        Raises:
            KeyError: an unknown variant was asked for.
        """
        if requested:
            if requested not in self.variants:
                raise KeyError(requested)
            return requested
        names = [v.name for v in self.config.variants]
        weights = [v.weight for v in self.config.variants]
        return self._random.choices(names, weights)[0] if len(names) > 1 else names[0]

    def swap(self, new: dict) -> dict:
        """Put ``new`` variants in (one reference each); returns the ones they replaced."""
        old = {name: self.variants[name] for name in new}
        self.variants = {**self.variants, **new}
        self._attach_ab()
        return old

    def _attach_ab(self) -> None:
        """Route the primary variant's calls through the A/B test (one test for the entry's life)."""
        for variant in self.variants.values():
            variant.pool.ab = None
        compared = [v for v in self.config.variants[1:] if v.compare > 0]
        if not compared:
            return
        primary = self.variants[self.primary]
        model = primary.pool.any_model()
        if self.ab is None:
            from ..ab import ABTest

            target = compared[0]
            self.ab = ABTest(
                _PrimaryArm(model),
                _CandidateArm(self, target.name),
                fraction=target.compare,
                background=True,
                name=f"{self.config.name}/{target.name}",
            )
        else:  # a reload: the arms call whatever serves now; the specs follow the new primary
            self.ab.primary.inputs, self.ab.primary.outputs = model.inputs, model.outputs
        primary.pool.ab = self.ab

    def describe(self) -> dict:
        return {
            "name": self.config.name,
            "primary": self.primary,
            "reloads": self.reloads,
            "rollbacks": self.rollbacks,
            "variants": {name: v.describe() for name, v in self.variants.items()},
        }

    def close(self, timeout_s: float) -> None:
        if self.ab is not None:
            self.ab.close()
        pools = [v.pool for v in self.variants.values()]
        if self.guard is not None:
            pools += [v.pool for v in self.guard.old.values()]
        for pool in pools:
            pool.close(timeout_s)


def reload_variants(entry: ModelEntry, names: list[str], overrides: dict, limits: Limits, loader: Callable) -> dict:
    """Load the new variants (blocking; called on a thread). Nothing is swapped here.

    Args:
        overrides: ``path`` and ``sha256`` for the one variant named, when a request gives them.
    """
    new = {}
    try:
        for name in names:
            config = next(v for v in entry.config.variants if v.name == name)
            if overrides:
                config = replace(config, path=overrides.get("path", config.path), sha256=overrides.get("sha256"))
            new[name] = open_variant(entry.config, config, limits, loader)
    except BaseException:
        for variant in new.values():
            variant.pool.close()
        raise
    return new


def check_reload_request(body: dict, entry: ModelEntry) -> tuple[list[str], dict]:
    """The variants a reload request names and its overrides, or `InputError`."""
    unknown = sorted(set(body) - {"variant", "path", "sha256"})
    if unknown:
        raise InputError(f"unknown reload field(s) {unknown}; expected variant, path, sha256")
    variant = body.get("variant")
    if variant is not None and variant not in entry.variants:
        raise InputError(f"model {entry.config.name} has no variant {variant!r}; it has {sorted(entry.variants)}")
    overrides = {k: body[k] for k in ("path", "sha256") if k in body}
    for key, value in overrides.items():
        if not isinstance(value, str) or not value:
            raise InputError(f"{key} must be a non-empty string")
    if overrides:
        if variant is None and len(entry.variants) > 1:
            raise InputError("a reload with a path names its variant")
        names = [variant or entry.primary]
    else:
        names = [variant] if variant else list(entry.variants)
    return names, overrides
