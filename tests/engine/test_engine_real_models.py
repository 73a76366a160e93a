"""Real int8 models on the engine: face_landmark and face_detection_short_range quantized
with TFLite's own post-training calibrator (the one the converter uses, shipped in the
LiteRT wheel), run on the Grace Hopper photo, bit for bit against LiteRT's reference
kernels on every kernel path."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import calibrate_int8, first_mismatch, fold_float16_weights, reference_outputs

import edgeinf
from edgeinf import kernels

cv2 = pytest.importorskip("cv2")
calibration = pytest.importorskip(
    "ai_edge_litert._pywrap_tensorflow_lite_calibration_wrapper", reason="TFLite's calibrator ships with ai-edge-litert"
)


def photo_crops(photo: np.ndarray) -> list[np.ndarray]:
    h, w = photo.shape[:2]
    boxes = [(0, 0, h, w), (h // 8, w // 4, h * 3 // 4, w * 3 // 4), (0, w // 6, h // 2, w * 5 // 6)]
    return [photo[a:c, b:d] for a, b, c, d in boxes]


def as_input(crop: np.ndarray, size: int) -> np.ndarray:
    return (cv2.resize(crop, (size, size)).astype(np.float32) / 255.0)[None]


@pytest.fixture(scope="module")
def grace_hopper(model_path) -> np.ndarray:
    return cv2.imread(str(model_path("grace_hopper")))[:, :, ::-1].copy()


@pytest.fixture(scope="module")
def face_landmark_int8(model_path, grace_hopper) -> bytes:
    """face_landmark with int8 activations, weights and input/output, calibrated on crops of the photo."""
    source = model_path("face_landmark").read_bytes()
    return calibrate_int8(source, [as_input(crop, 192) for crop in photo_crops(grace_hopper)])


@pytest.fixture(scope="module")
def face_detection_int8(model_path, grace_hopper) -> bytes:
    """face_detection_short_range in int8: its float16 weights folded to float32 first."""
    source = fold_float16_weights(model_path("face_detection_short_range").read_bytes())
    return calibrate_int8(source, [as_input(crop, 128) * 2 - 1 for crop in photo_crops(grace_hopper)])


def quantized(x: np.ndarray, spec) -> np.ndarray:
    """Float input ``x`` in the int8 quantization of input ``spec``."""
    q = spec.quantization
    return np.clip(np.round(x / q.scale) + q.zero_point, -128, 127).astype(np.int8)


def quantized_face(photo: np.ndarray, spec) -> np.ndarray:
    return quantized(as_input(photo[75:450, 128:384], spec.shape[1]), spec)


def assert_exact_on_each_isa(model, x: np.ndarray, want: list[np.ndarray]) -> None:
    """``model`` run on ``x`` under every kernel path gives ``want``, bit for bit."""
    for isa in kernels.supported_isas() + kernels.emulated_isas():
        with kernels.use_isa(isa):
            got = model.run(x)
        for (name, g), w in zip(got.items(), want):
            msg = first_mismatch(g, w)
            assert not msg, f"{name} on {isa}: {msg}"


@pytest.mark.parametrize("threads", [1, 2])
def test_face_landmark_int8_runs_natively_and_exactly(tmp_path, face_landmark_int8, grace_hopper, threads):
    path = tmp_path / "face_landmark_int8.tflite"
    path.write_bytes(face_landmark_int8)
    with edgeinf.load(path, backend="edgeinf", num_threads=threads) as model:
        details = model.details
        assert "fallback" not in details, details.get("fallback")
        assert details["plan"]["ops"]["PRELU"] == 23
        x = quantized_face(grace_hopper, model.inputs[0])
        assert_exact_on_each_isa(model, x, reference_outputs(face_landmark_int8, [x]))
        # The landmarks are a face's, not a constant: they spread over the crop.
        landmarks = model.run(x, dequantize=True)[model.outputs[0].name].reshape(-1, 3)
        assert np.ptp(landmarks[:, 0]) > 40 and np.ptp(landmarks[:, 1]) > 40


@pytest.mark.parametrize("threads", [1, 2])
def test_face_detection_int8_runs_natively_and_exactly(tmp_path, face_detection_int8, grace_hopper, threads):
    path = tmp_path / "face_detection_int8.tflite"
    path.write_bytes(face_detection_int8)
    with edgeinf.load(path, backend="edgeinf", num_threads=threads) as model:
        assert "fallback" not in model.details, model.details.get("fallback")
        x = quantized(as_input(grace_hopper, 128) * 2 - 1, model.inputs[0])
        assert_exact_on_each_isa(model, x, reference_outputs(face_detection_int8, [x]))


def test_a_float_model_falls_back_to_litert_with_its_outputs(model_path, grace_hopper):
    path = model_path("face_detection_short_range")
    with (
        edgeinf.load(path, backend="edgeinf", num_threads=1) as fallback,
        edgeinf.load(path, backend="tflite", num_threads=1) as litert,
    ):
        assert fallback.backend == "tflite"
        assert "FLOAT32" in fallback.details["fallback"] or "FLOAT16" in fallback.details["fallback"]
        x = as_input(grace_hopper, 128)
        for (name, got), want in zip(fallback.run(x).items(), litert.run(x).values()):
            assert np.array_equal(got, want), name


def test_run_image_on_the_engine_equals_the_reference(tmp_path, face_landmark_int8, grace_hopper):
    """The camera path: run_image converts the frame straight into the engine's arena."""
    path = tmp_path / "face_landmark_int8.tflite"
    path.write_bytes(face_landmark_int8)
    frame = np.ascontiguousarray(grace_hopper[75:450, 128:384, ::-1])  # BGR, as a camera gives
    with (
        edgeinf.load(path, backend="edgeinf", num_threads=1) as model,
        edgeinf.load(path, backend="tflite", num_threads=1, reference=True) as reference,
    ):
        got, want = model.run_image(frame, color="bgr"), reference.run_image(frame, color="bgr")
        for name in want:
            assert not first_mismatch(got[name], want[name]), name
        assert model.metrics.snapshot().calls == 1  # counted like any other backend's call


# The int8 face models `edgeinf quantize` makes (cached beside the float models): their
# PRELUs stay float between a DEQUANTIZE and a QUANTIZE, which the engine runs as tables.
EDGEINF_QUANTIZED = {"face_landmark": (192, False), "face_detection_short_range": (128, True),
                     "face_detection_full_range": (192, True)}  # fmt: skip


@pytest.mark.parametrize("name", EDGEINF_QUANTIZED)
def test_edgeinf_quantized_face_models_run_fully_natively_and_exactly(name, grace_hopper):
    quantize = pytest.importorskip("edgeinf.quantize", reason="edgeinf quantize builds the int8 face models")
    path = quantize.int8_path(name)
    size, signed = EDGEINF_QUANTIZED[name]
    with edgeinf.load(path, backend="edgeinf", num_threads=2) as model:
        assert model.backend == "edgeinf"
        assert "fallback" not in model.details, model.details.get("fallback")
        x = as_input(grace_hopper[75:450, 128:384], size)
        x = quantized(x * 2 - 1 if signed else x, model.inputs[0])
        assert_exact_on_each_isa(model, x, reference_outputs(path.read_bytes(), [x]))
        if name == "face_landmark":
            # The 20 PRELUs after a residual ADD run in one step with it; the 3 after a
            # convolution on their own.
            ops = model.details["plan"]["ops"]
            assert (ops["ADD+DEQUANTIZE+PRELU+QUANTIZE"], ops["DEQUANTIZE+PRELU+QUANTIZE"]) == (20, 3)
            # Each PRELU's tables proved two lines per channel at load: computed, not looked up.
            steps = model._backend._program.step_names()
            assert steps.count("ADD+DEQUANTIZE+PRELU+QUANTIZE (two lines)") == 20, steps
            assert steps.count("DEQUANTIZE+PRELU+QUANTIZE (two lines)") == 3, steps


@pytest.mark.parametrize("path", ["avx2vnni", "avx512vnni", "avx512amx", "avx2-emulated-vnni"])
def test_face_models_planned_on_a_vnni_path_equal_the_reference(tmp_path, face_detection_int8, face_landmark_int8,
                                                                grace_hopper, path):  # fmt: skip
    # Loaded under the path, as on a CPU that has it: the plan then keeps every pointwise
    # convolution on the VPDPBUSD GEMM (AVX2's narrow pointwise kernel is planned on AVX2 only).
    if path not in kernels.supported_isas() + kernels.emulated_isas():
        pytest.skip(f"kernel path {path} is not usable on this CPU or build ({kernels.cpu_features()})")
    for name, data in (("detection", face_detection_int8), ("landmark", face_landmark_int8)):
        model_file = tmp_path / f"{name}.tflite"
        model_file.write_bytes(data)
        with kernels.use_isa(path), edgeinf.load(model_file, backend="edgeinf", num_threads=2) as model:
            assert model.details["isa"] == path
            x = quantized_face(grace_hopper, model.inputs[0])
            for (output, got), want in zip(model.run(x).items(), reference_outputs(data, [x])):
                msg = first_mismatch(got, want)
                assert not msg, f"{name} {output} on {path}: {msg}"


def test_every_add_of_the_face_models_runs_its_linear_form(face_landmark_int8, face_detection_int8):
    # The engine's equal-shape ADD takes its fast AVX2 or NEON form only where a linear form exact on
    # all 65536 input pairs exists: every ADD of the calibrated face models must have one, and
    # each path's kernel for that form (int16 or int32) gives the reference on every pair.
    from edgeinf import _C
    from edgeinf.engine.plan import plan_model
    from edgeinf.formats.tflite import read_tflite
    from edgeinf.isa import supported_isas, use_isa

    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    for data in (face_landmark_int8, face_detection_int8):
        adds = [s for s in plan_model(read_tflite(data)).steps if s.method == "add" and not s.args["subtract"]]
        assert adds
        for step in adds:
            params = step.args["params"]
            form = _C.add_linear_form(params)
            assert form is not None, f"ADD {step.nodes}: {params}"
            with use_isa("scalar"):
                want = _C.add(a, b, params)
            for isa in supported_isas():
                with use_isa(isa):
                    got = _C.add_prepared(a, b, params)
                wrong = np.flatnonzero(got != want)
                assert not wrong.size, (
                    f"ADD {step.nodes} form {form} on {isa}: pair ({a[wrong[0]]}, {b[wrong[0]]}) "
                    f"gives {got[wrong[0]]}, the reference {want[wrong[0]]}"
                )
