"""Every .tflite model the tests have, float and int8, for the delegation agreement test.

- the manifest's float models;
- their int8 versions from `edgeinf quantize` (the cached ones: building them is slow);
- the TFLite post-training calibrator's int8 versions (the LiteRT wheel's own quantizer,
  the one the converter uses), calibrated on crops of the Grace Hopper photo;
- the per-op int8 models the engine tests build (tests/engine/test_engine_ops.py, seed 0).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import sys
from pathlib import Path
from unittest import mock

import numpy as np

from edgeinf import zoo

ENGINE_TESTS = Path(__file__).resolve().parents[1] / "engine"


def manifest_models() -> dict[str, Path]:
    return {name: zoo.path(name) for name in zoo.names() if zoo.path(name).suffix == ".tflite"}


def quantize_models() -> dict[str, Path]:
    """The int8 face models `edgeinf quantize` makes, built and cached on first use; those
    that are not cached where the quantizer is not installed are left out."""
    from edgeinf.errors import BackendUnavailableError
    from edgeinf.quantize.models import FACE_MODELS, int8_path

    found = {}
    for name in FACE_MODELS:
        try:
            found[f"{name} (edgeinf quantize)"] = int8_path(name)
        except BackendUnavailableError:
            continue
    return found


def _photo_crops(size: int, signed: bool) -> list[np.ndarray]:
    import cv2

    photo = cv2.imread(str(zoo.path("grace_hopper")))[:, :, ::-1]
    h, w = photo.shape[:2]
    boxes = [(0, 0, h, w), (h // 8, w // 4, h * 3 // 4, w * 3 // 4), (0, w // 6, h // 2, w * 5 // 6)]
    crops = []
    for a, b, c, d in boxes:
        x = cv2.resize(photo[a:c, b:d], (size, size)).astype(np.float32) / 255.0
        crops.append((x * 2 - 1 if signed else x)[None])
    return crops


def calibrator_models(workdir: Path) -> dict[str, Path]:
    """face_landmark and face_detection_short_range through TFLite's calibrator (int8
    activations, weights, input and output): face_landmark keeps int8 PRELU, which
    XNNPACK does not take."""
    sys.path.insert(0, str(ENGINE_TESTS))
    from engine_models import calibrate_int8, fold_float16_weights

    found = {}
    for name, size, signed in (("face_landmark", 192, False), ("face_detection_short_range", 128, True)):
        source = fold_float16_weights(zoo.path(name).read_bytes())
        path = workdir / f"{name}_calibrated_int8.tflite"
        path.write_bytes(calibrate_int8(source, _photo_crops(size, signed)))
        found[f"{name} (TFLite calibrator)"] = path
    return found


class _Captured(Exception):
    pass


# Fixtures of test_engine_ops.py, as pytest gives them for seed 0.
_SEED_FIXTURES = ("seed", "rng", "g")


def _seed_fixtures(graph_class) -> dict:
    rng = np.random.default_rng(0)
    return {"seed": 0, "rng": rng, "g": graph_class(rng)}


def _parameter_sets(test) -> list[dict]:
    """The keyword sets pytest would call ``test`` with (its parametrize marks), seed 0 only;
    the seed fixtures (`_SEED_FIXTURES`) are added at the call."""
    axes = []
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
        rows = []
        for value in mark.args[1]:
            value = getattr(value, "values", value)  # pytest.param
            rows.append(dict(zip(names, value)) if len(names) > 1 else {names[0]: value})
        if names == ["seed"]:
            rows = rows[:1]
        axes.append(rows)
    sets = [dict(kv for row in combo for kv in row.items()) for combo in itertools.product(*axes)]
    wanted = set(inspect.signature(test).parameters)
    return [s for s in sets if set(s) <= wanted and wanted - set(s) <= set(_SEED_FIXTURES)]


def engine_op_models(workdir: Path) -> dict[str, Path]:
    """The first model each engine op test builds, for each of its parameter sets."""
    sys.path.insert(0, str(ENGINE_TESTS))
    import test_engine_ops

    built: list[bytes] = []

    def capture(data, *args, **kwargs):
        built.append(data)
        raise _Captured

    found = {}
    with mock.patch.object(test_engine_ops, "assert_engine_exact", capture):
        for name, test in vars(test_engine_ops).items():
            if not name.startswith("test_") or not callable(test):
                continue
            wanted = set(inspect.signature(test).parameters)
            for k, kwargs in enumerate(_parameter_sets(test)):
                del built[:]
                fixtures = _seed_fixtures(test_engine_ops.Graph)
                with contextlib.suppress(_Captured):
                    test(**kwargs, **{arg: fixtures[arg] for arg in wanted - set(kwargs)})
                if built:
                    path = workdir / f"{name}_{k}.tflite"
                    path.write_bytes(built[0])
                    found[f"{name}[{k}] {kwargs}"] = path
    return found
