"""edgeinf.quantize on the real face models and real photos, and on tiny self-built models.

Each int8 face model is built once per session (into a temporary directory, not the
user's cache) and shared by the tests.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

pytest.importorskip("ai_edge_quantizer")
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402

import edgeinf  # noqa: E402
from edgeinf import zoo  # noqa: E402
from edgeinf.errors import InputError, ModelFileError, UnsupportedOperatorError  # noqa: E402
from edgeinf.formats.tflite import read_tflite  # noqa: E402
from edgeinf.formats.tflite_schema import schema  # noqa: E402
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model, unpack  # noqa: E402
from edgeinf.quantize import check_accuracy, models, photos, quantize  # noqa: E402
from edgeinf.quantize.calibration import Progress, split_holdout  # noqa: E402
from edgeinf.quantize.prepare import opcode_name, prepare  # noqa: E402
from edgeinf.quantize.report import TensorError, trap_warnings  # noqa: E402
from edgeinf.quantize.tasks import VARIANTS, Task, detection_metric, landmark_metric  # noqa: E402

FACE_MODELS = models.FACE_MODELS


@pytest.fixture(scope="session")
def photo_paths():
    return [photos.path(name) for name in photos.names()]


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """name -> QuantizeResult of a fresh build with the recorded settings (one per session)."""
    folder = tmp_path_factory.mktemp("int8")
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = models.build(name, folder / f"{name}_int8.tflite")
        return cache[name]

    return get


def _rgb(path):
    from edgeinf.quantize.calibration import read_rgb

    return read_rgb(path)


# ---- the preparation ---------------------------------------------------------------------------


def test_prepare_fixes_opcodes_adds_signature_folds_float16_without_changing_outputs(rng):
    data = zoo.path("face_detection_short_range").read_bytes()
    before = unpack(data)
    assert any(oc.builtinCode < oc.deprecatedBuiltinCode for oc in before.operatorCodes)
    assert not before.signatureDefs
    prepared, changes = prepare(data)
    after = unpack(prepared)
    assert changes == {"opcodes_fixed": 8, "signature_added": 1, "float16_folded": 74, "relu_fused": 17}
    assert all(oc.builtinCode >= oc.deprecatedBuiltinCode for oc in after.operatorCodes)
    assert [s.signatureKey for s in after.signatureDefs] in ([b"serving_default"], ["serving_default"])
    kinds = {opcode_name(after, op.opcodeIndex) for op in after.subgraphs[0].operators}
    assert "DEQUANTIZE" not in kinds and "RELU" not in kinds
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    outs = []
    for blob in (data, prepared):
        it = Interpreter(model_content=blob, num_threads=1)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)  # float16 -> float32 is exact; the graph is the same


def _run_float(blob: bytes, x: np.ndarray) -> list[np.ndarray]:
    it = Interpreter(model_content=blob, num_threads=1)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def test_equalization_leaves_the_float_model_unchanged_and_narrows_the_wide_channel(photo_paths):
    from edgeinf.quantize import _samples
    from edgeinf.quantize.equalize import candidate_tensors, channel_ranges, equalize
    from edgeinf.quantize.tasks import calibration_frames, task_for

    path = zoo.path("face_detection_short_range")
    prepared, _ = prepare(path.read_bytes())
    samples = [s.tensor for s in _samples(path, photo_paths[:4], task_for(path), calibration_frames)]
    ranges = channel_ranges(prepared, candidate_tensors(prepared), samples)
    assert ranges["depthwise_conv2d_15"].max() > 20 * np.median(ranges["depthwise_conv2d_15"])
    equalized, gains = equalize(prepared, ranges)
    assert gains["depthwise_conv2d_15"] > 10
    after = channel_ranges(equalized, ["depthwise_conv2d_15/equalized"], samples)["depthwise_conv2d_15/equalized"]
    assert after.max() < 3 * np.percentile(after, 90)
    for x in samples[:3]:
        for a, b in zip(_run_float(prepared, x), _run_float(equalized, x)):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-3)


# ---- the int8 face models ----------------------------------------------------------------------


@pytest.mark.parametrize("name", FACE_MODELS)
def test_int8_face_model_is_deterministic_and_as_recorded(built, name):
    result = built(name)
    record = photos.data()["models"][name]
    if record["environment"] != models.environment():
        pytest.skip(f"sha256 recorded in {record['environment']}, this is {models.environment()}")
    assert result.sha256 == record["sha256"]


@pytest.mark.parametrize("name", FACE_MODELS)
@pytest.mark.parametrize("resolver", ["xnnpack", "reference"])
def test_int8_face_model_loads_and_runs_on_litert(built, name, resolver):
    path = built(name).output
    kwargs = {} if resolver == "xnnpack" else {"experimental_op_resolver_type": OpResolverType.BUILTIN_REF}
    it = Interpreter(model_path=str(path), num_threads=1, **kwargs)
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    assert detail["dtype"] == np.int8
    it.set_tensor(detail["index"], np.zeros(detail["shape"], np.int8))
    it.invoke()
    report = edgeinf.check(path, backend="tflite")
    assert report.runnable("tflite"), report.to_text()
    if name != "face_landmark":  # its PRELUs stay float between QUANTIZE/DEQUANTIZE, still one partition
        assert report.verdict("tflite") == "YES", report.to_text()  # no standalone int8 RELU: one partition


@pytest.mark.parametrize("name", FACE_MODELS)
def test_int8_follows_the_tflite_int8_scheme(built, name):
    """Weights symmetric per output channel, int32 biases with scale input_scale * weight_scale."""
    parsed = read_tflite(built(name).output.read_bytes())
    sg = parsed.subgraphs[0]
    convs = [op for op in sg.operators if op.opcode.name in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert convs
    for op in convs:
        x, w, b = (sg.tensors[i] for i in op.inputs[:3])
        assert w.dtype == "INT8" and x.dtype == "INT8", op
        q = w.quantization
        axis = 0 if op.opcode.name == "CONV_2D" else 3
        assert set(q.zero_points) == {0} and q.quantized_dimension == axis
        assert len(q.scales) == w.shape[axis]
        assert b.dtype == "INT32" and set(b.quantization.zero_points) == {0}
        np.testing.assert_allclose(b.quantization.scales, x.quantization.scales[0] * np.asarray(q.scales), rtol=1e-5)


DETECTORS = ["face_detection_short_range", "face_detection_full_range"]


def _detections(built, photo_paths, name):
    task = Task("face_detection", {}, VARIANTS[name])
    return detection_metric(zoo.path(name), built(name).output, task, [(p.name, _rgb(p)) for p in photo_paths])


@pytest.mark.parametrize("name", DETECTORS)
def test_int8_detectors_find_the_same_faces_on_real_photos(built, photo_paths, name):
    metric = _detections(built, photo_paths, name)
    assert metric["faces_judged"] >= 4, metric  # the photos hold faces this model finds clearly
    assert metric["faces_matched"] == metric["faces_judged"] and metric["extra_faces"] == 0, metric
    for face in metric["faces"]:
        if not face["borderline"]:
            assert face["iou"] >= 0.9, face
            assert face["score_drift"] <= 0.05, face


def test_int8_landmarks_stay_within_one_and_a_half_percent_of_the_face(built, photo_paths):
    task = Task("face_landmark", {"mean": 0.0, "std": 255.0, "resize": "area"})
    metric = landmark_metric(
        zoo.path("face_landmark"), built("face_landmark").output, task, [(p.name, _rgb(p)) for p in photo_paths]
    )
    assert len(metric["faces"]) >= 4, metric
    assert metric["mean_landmark_error_rel"] < 0.015, metric
    assert all(face["error_rel"] < 0.015 for face in metric["faces"]), metric


def test_report_ranks_layers_and_names_what_the_quantizer_left_in_float(built):
    result = built("face_landmark")
    report = result.report
    assert [t.name for t in report.outputs] == ["conv2d_20", "conv2d_30"]
    cosines = [t.cosine for t in report.layers]
    assert cosines == sorted(cosines) and len(report.layers) > 50
    assert report.worst_layers()[0].cosine < report.outputs[0].cosine
    assert report.float_ops and all(op.startswith("PRELU (node ") for op in report.float_ops)
    assert any("left in float" in w for w in report.warnings)
    data = json.loads(report.to_json())
    assert data["worst_layers"] == [t.name for t in report.worst_layers()]
    assert "mean_landmark_error_rel" in data["task"]
    assert "layers losing most" in report.to_text()


def test_equalization_keeps_the_layer_after_the_wide_channel(built):
    """Without equalization conv2d_16 (after depthwise_conv2d_15, one channel at -442) fell to cosine 0.96."""
    layers = {t.name: t for t in built("face_detection_short_range").report.layers}
    assert layers["conv2d_16"].cosine > 0.98
    assert "depthwise_conv2d_15" not in layers  # rescaled: not compared with the float tensor of that name


@pytest.mark.parametrize("io_type", ["float", "uint8"])
def test_io_type_rewrite_of_a_real_int8_model(built, rng, io_type):
    from edgeinf.quantize.io_types import set_io_type

    data = built("face_detection_short_range").output.read_bytes()
    rewritten = set_io_type(data, io_type)
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    results = []
    for blob in (data, rewritten):
        it = Interpreter(model_content=blob, num_threads=1)
        it.allocate_tensors()
        d = it.get_input_details()[0]
        if d["dtype"] == np.float32:
            it.set_tensor(d["index"], x)
        else:
            scale, zero = d["quantization"]
            info = np.iinfo(d["dtype"])
            it.set_tensor(d["index"], np.clip(np.round(x / scale) + zero, info.min, info.max).astype(d["dtype"]))
        it.invoke()
        outs = []
        for o in it.get_output_details():
            v = it.get_tensor(o["index"])
            scale, zero = o["quantization"]
            outs.append(v if o["dtype"] == np.float32 else (v.astype(np.float32) - zero) * scale)
        results.append(outs)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)  # the same int8 arithmetic inside, only the interface changed


def test_check_reports_on_an_existing_int8_model(built, photo_paths):
    path = built("face_detection_short_range").output
    report = check_accuracy(path, zoo.path("face_detection_short_range"), photo_paths[:3])
    assert report.task["faces_matched"] == report.task["faces_judged"] >= 2 and report.task["extra_faces"] == 0
    assert {t.name for t in report.outputs} == {"regressors", "classificators"}
    regressors = next(t for t in report.outputs if t.name == "regressors")
    assert 0.95 < regressors.cosine <= 1.0  # the score logits are clipped to ±10 on purpose: not compared


def test_an_int8_model_is_refused(built, photo_paths, tmp_path):
    with pytest.raises(ModelFileError, match="already quantized"):
        quantize(built("face_detection_short_range").output, photo_paths[:1], tmp_path / "again.tflite")


# ---- tiny self-built models --------------------------------------------------------------------


def _tiny(extra_op: str | None = None, wide_channel: float = 1.0) -> bytes:
    """input 1x16x16x3 -> CONV_2D 3x3 (4 filters, RELU) [-> extra_op]; filter 0 scaled by ``wide_channel``."""
    rng = np.random.default_rng(7)
    filters = rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    filters[0] *= wide_channel
    s = schema()
    conv = s.Conv2DOptionsT()
    conv.padding, conv.strideW, conv.strideH = s.Padding.SAME, 1, 1
    conv.fusedActivationFunction = s.ActivationFunctionType.RELU
    tensors = [
        TensorDef("image", (1, 16, 16, 3), "float32"),
        TensorDef("filters", (4, 3, 3, 3), "float32", data=filters),
        TensorDef("bias", (4,), "float32", data=np.array([0.1, -0.2, 0.3, 0.0], np.float32)),
        TensorDef("features", (1, 16, 16, 4), "float32"),
    ]
    ops = [OpDef("CONV_2D", [0, 1, 2], [3], options=conv)]
    if extra_op:
        tensors.append(TensorDef("out", (1, 16, 16, 4), "float32"))
        ops.append(OpDef(extra_op, [3], [4]))
    return build_model(tensors, ops, inputs=[0], outputs=[len(tensors) - 1])


NORM = {"mean": 127.5, "std": 127.5}


@pytest.mark.parametrize("io_type, dtype", [("int8", np.int8), ("uint8", np.uint8), ("float", np.float32)])
def test_io_type_of_a_quantized_model(tmp_path, photo_paths, io_type, dtype):
    src = tmp_path / "tiny.tflite"
    src.write_bytes(_tiny())
    result = quantize(src, photo_paths[:3], tmp_path / "tiny_int8.tflite", io=io_type, options=NORM)
    with edgeinf.load(result.output, num_threads=1) as model:
        assert model.inputs[0].dtype == dtype and model.outputs[0].dtype == dtype
        assert model.inputs[0].name == "image" and model.outputs[0].name == "features"
        frame = _rgb(photo_paths[0])
        got = model.run_image(frame, color="rgb", **NORM)["features"]
        spec = model.outputs[0]
        got = spec.quantization.dequantize(got) if spec.quantization is not None else got
    with edgeinf.load(src, num_threads=1) as ref:
        want = ref.run_image(frame, color="rgb", **NORM)["features"]
    scale = result.report.outputs[0].scale
    assert np.abs(got - want).max() <= 3 * scale  # a few int8 steps, through any interface
    assert result.report.outputs[0].cosine > 0.999


@pytest.mark.parametrize("per_channel", [True, False])
def test_weight_scales_per_channel_or_per_tensor(tmp_path, photo_paths, per_channel):
    src = tmp_path / "tiny.tflite"
    src.write_bytes(_tiny())
    out = quantize(src, photo_paths[:2], tmp_path / "o.tflite", options=NORM, per_channel=per_channel, evaluate=False)
    sg = read_tflite(out.output.read_bytes()).subgraphs[0]
    conv = next(op for op in sg.operators if op.opcode.name == "CONV_2D")
    weights = sg.tensors[conv.inputs[1]]
    assert weights.dtype == "INT8" and set(weights.quantization.zero_points) == {0}
    assert len(weights.quantization.scales) == (4 if per_channel else 1)


def test_ops_the_quantizer_cannot_handle_are_named_with_their_node(tmp_path, photo_paths):
    src = tmp_path / "tiny_exp.tflite"
    src.write_bytes(_tiny("EXP"))
    with pytest.raises(UnsupportedOperatorError, match=r"EXP \(node \d+, output 'out'\)"):
        quantize(src, photo_paths[:2], tmp_path / "x.tflite", options=NORM, strict=True, evaluate=False)
    result = quantize(src, photo_paths[:2], tmp_path / "x.tflite", options=NORM, evaluate=False)
    assert len(result.float_ops) == 1 and result.float_ops[0].startswith("EXP (node ")


def test_report_names_a_channel_that_sets_the_scale_of_all(tmp_path, photo_paths):
    src = tmp_path / "tiny_wide.tflite"
    src.write_bytes(_tiny(wide_channel=40.0))
    report = quantize(src, photo_paths[:3], tmp_path / "o.tflite", options=NORM).report
    assert any("'features'" in w and "channel 0 spans" in w for w in report.warnings), report.warnings
    plain = tmp_path / "tiny.tflite"
    plain.write_bytes(_tiny())
    report = quantize(plain, photo_paths[:3], tmp_path / "p.tflite", options=NORM).report
    assert not any("channel 0 spans" in w for w in report.warnings), report.warnings


def test_calibration_errors_are_clear(tmp_path, photo_paths):
    src = tmp_path / "tiny.tflite"
    src.write_bytes(_tiny())
    out = tmp_path / "o.tflite"
    with pytest.raises(InputError, match="no calibration images"):
        quantize(src, [], out, options=NORM)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no calibration images in"):
        quantize(src, [tmp_path / "empty"], out, options=NORM)
    with pytest.raises(InputError, match="does not exist"):
        quantize(src, [tmp_path / "nope"], out, options=NORM)
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(InputError, match="broken.jpg: not a decodable image"):
        quantize(src, [broken], out, options=NORM)
    with pytest.raises(InputError, match="states no normalization"):
        quantize(src, photo_paths[:1], out)
    with pytest.raises(InputError, match="no tensor named 'scores'"):
        quantize(src, photo_paths[:1], out, options=NORM, output_ranges={"scores": (-1, 1)}, evaluate=False)
    with pytest.raises(InputError, match="io must be one of"):
        quantize(src, photo_paths[:1], out, io="int4", options=NORM)
    assert not out.exists()


def test_cli_quantize_and_check_json(tmp_path, photo_paths, capsys):
    from edgeinf.quantize.cli import main

    src = tmp_path / "tiny.tflite"
    src.write_bytes(_tiny())
    out = tmp_path / "tiny_int8.tflite"
    calib = [str(p) for p in photo_paths[:3]]
    assert main([str(src), "--calib", *calib, "-o", str(out), "--mean", "127.5", "--std", "127.5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["output"] == str(out) and out.is_file()
    assert result["held_aside"] == [calib[1]] and result["report"]["outputs"][0]["name"] == "features"
    argv = ["--check", str(out), "--against", str(src), "--calib", calib[0], "--mean", "127.5", "--std", "127.5"]
    assert main(argv) == 0
    assert "layers losing most" in capsys.readouterr().out
    assert main([str(src), "--calib", str(tmp_path / "missing"), "-o", str(out)]) == 2
    assert "InputError" in capsys.readouterr().err


# ---- pieces ------------------------------------------------------------------------------------


def test_trap_warnings():
    def t(name, lo, hi, scale, zp=0, p999=None, dq=50, df=50):
        return TensorError(name, "OP (node 0)", 0.0, 0.0, 1.0, lo, hi, scale, zp, (hi - lo) / scale,
                           p999 if p999 is not None else max(abs(lo), abs(hi)), dq, df)  # fmt: skip

    boxes, scores = t("boxes", -100.0, 100.0, 0.8), t("scores", -1.0, 1.0, 0.8)
    warnings = trap_warnings((boxes, scores), ())
    assert any("'scores' spans only 2.5 int8 steps" in w for w in warnings)
    assert any("share one scale" in w for w in warnings)
    assert not trap_warnings((t("boxes", -100.0, 100.0, 0.8), t("scores", -1.0, 1.0, 0.008)), ())
    assert any("collapsed to 1 distinct value" in w for w in trap_warnings((t("flag", -5, 5, 0.05, dq=1, df=3),), ()))
    outlier = t("act", -50.0, 200.0, 1.0, p999=2.0)
    assert any("set by outliers" in w and "'act'" in w for w in trap_warnings((), (outlier,)))


def test_holdout_and_progress(tmp_path):
    files = [tmp_path / f"{i}.png" for i in range(8)]
    calib, held = split_holdout(files)
    assert held == [files[1], files[5]] and not set(held) & set(calib)
    assert split_holdout(files[:1]) == (files[:1], files[:1])
    stream = io.StringIO()
    bar = Progress(3, "calibrating", stream=stream)
    bar.step()
    assert stream.getvalue() == ""  # not a terminal: no bar
    bar = Progress(2, "calibrating", stream=stream, enabled=True)
    bar.step()
    bar.step()
    bar.close()
    assert "2/2" in stream.getvalue()


def test_int8_path_rebuilds_a_cached_file_that_does_not_match(tmp_path, monkeypatch):
    cached = tmp_path / "m_int8.tflite"
    cached.write_bytes(b"tampered")
    good = b"TFL3-not-really-but-recorded"
    import hashlib

    monkeypatch.setattr(models, "cached_path", lambda name: cached)
    monkeypatch.setattr(
        photos, "data", lambda: {"models": {"m": {"sha256": hashlib.sha256(good).hexdigest(), "environment": {}}}}
    )
    calls = []

    def fake_build(name, output):
        calls.append(name)
        output.write_bytes(good)

        class R:
            sha256 = hashlib.sha256(good).hexdigest()

        return R()

    monkeypatch.setattr(models, "build", fake_build)
    assert models.int8_path("m") == cached and calls == ["m"] and cached.read_bytes() == good
    assert models.int8_path("m") == cached and calls == ["m"]  # matches now: used as is


def test_import_edgeinf_quantize_does_not_import_the_quantizer():
    import subprocess
    import sys

    code = "import sys, edgeinf.quantize; print('ai_edge_quantizer' in sys.modules, 'ai_edge_litert' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_demo_int8_finds_the_face_the_float_demo_finds(built, tmp_path, monkeypatch, capsys):
    from edgeinf.cli import main

    int8 = tmp_path / "int8" / "face_detection_short_range.tflite"
    int8.parent.mkdir()
    int8.write_bytes(built("face_detection_short_range").output.read_bytes())
    asked = []
    monkeypatch.setattr(models, "cached_path", lambda name: asked.append(name) or int8)

    def faces(*flags):
        assert main(["demo", "--out", str(tmp_path / "out.png"), *flags]) == 0
        out = capsys.readouterr().out
        return out, [line for line in out.splitlines() if line.lstrip().startswith("#")]

    _, float_faces = faces()
    assert asked == []
    _, int8_faces = faces("--int8")
    assert asked == ["face_detection_short_range"]
    assert len(int8_faces) == len(float_faces) == 1
    score = lambda line: float(line.split("score")[1].split()[0])  # noqa: E731
    assert abs(score(int8_faces[0]) - score(float_faces[0])) <= 0.05
    assert main(["demo", "--int8", "--model", str(int8)]) == 2  # --int8 takes a manifest detector
