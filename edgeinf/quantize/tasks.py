"""What edgeinf knows about the manifest's face models: how to feed them and how to judge them.

A generic model is calibrated on whole images with the preprocessing the caller states
(or its metadata states). For MediaPipe's BlazeFace detectors and face mesh, edgeinf
knows the normalization (`edgeinf.face`), what a good calibration frame is (whole
photos and face crops for the detectors, face crops for the landmark model) and the
task metric: the same faces found, or the same landmarks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..face import VARIANTS, BlazeFaceConfig

DETECTOR_OPTIONS = {"letterbox": True, "mean": 127.5, "std": 127.5, "pad": 0.0, "resize": "area"}
# MediaPipe's face mesh graph feeds its crop in [0, 1], stretched to the square input.
LANDMARK_OPTIONS = {"mean": 0.0, "std": 255.0, "resize": "area"}
LANDMARK_CROP_SCALE = 1.5  # the face box grown by half, as MediaPipe crops a face for the mesh
LANDMARK_POINTS = 468
# Score logits beyond ±10 are certain (sigmoid 0.99995): calibrated ranges reach -300 on
# background anchors, and one int8 step would then be 1.4 logits at the threshold.
SCORE_LOGIT_RANGE = (-10.0, 10.0)
BORDERLINE = 0.05  # faces scored this close to the threshold may flip either way in int8
# Calibration frames follow each detector's domain. Short range is made for faces within
# about 2 m of the camera (selfie framing): it also sees crops around each face, 2 to 4
# face widths across. Full range is made for faces up to 5 m away: whole photos.
FACE_CROPS = {"face_detection_short_range": (2.0, 3.0, 4.0), "face_detection_full_range": ()}


@dataclass(frozen=True)
class Task:
    """How to feed and judge one model.

    Attributes:
        kind: ``"face_detection"``, ``"face_landmark"`` or ``"generic"``.
        options: preprocessing options for `edgeinf.preprocess` (mean, std, letterbox...).
        detector: the BlazeFace layout of a face detector, else None.
    """

    kind: str
    options: dict
    detector: BlazeFaceConfig | None = None
    face_crops: tuple[float, ...] = ()

    def output_ranges(self, output_shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[float, float]]:
        """Ranges to clip calibration to, by output name: a face detector's score logits."""
        if self.kind != "face_detection":
            return {}
        return {name: SCORE_LOGIT_RANGE for name, shape in output_shapes.items() if shape and shape[-1] == 1}


def _manifest_shas() -> dict[str, str]:
    from .. import zoo

    shas = {}
    for name in ("face_detection_short_range", "face_detection_full_range", "face_landmark"):
        item = zoo.entry(name)
        shas[item["files"][item["main"]]["sha256"]] = name
    return shas


def known_name(path: Path) -> str | None:
    """The manifest name of a face model, recognised by its sha256 (renamed copies too) or file name."""
    from .. import zoo

    name = _manifest_shas().get(zoo.sha256_of(path))
    if name is None and path.stem in (*VARIANTS, "face_landmark"):
        name = path.stem
    return name


def task_for(path: Path, options: dict | None = None, kind: str | None = None) -> Task:
    """The task of a float model; explicit ``options`` win over what edgeinf knows."""
    name = kind or known_name(path)
    if name in VARIANTS:
        return Task("face_detection", {**DETECTOR_OPTIONS, **(options or {})}, VARIANTS[name], FACE_CROPS[name])
    if name == "face_landmark":
        return Task("face_landmark", {**LANDMARK_OPTIONS, **(options or {})})
    return Task("generic", dict(options or {}))


def face_rois(rgb: np.ndarray, scales=(LANDMARK_CROP_SCALE,)) -> list[tuple[int, int, int, int]]:
    """Square crops (x, y, w, h) around each face the float detectors find, inside the image."""
    found: list[np.ndarray] = []
    for name in ("face_detection_full_range", "face_detection_short_range"):
        for face in _detector(name).detect(rgb):
            box = np.asarray(face.box)
            if all(_iou(box, other) < 0.5 for other in found):
                found.append(box)
    h, w = rgb.shape[:2]
    rois = []
    for x0, y0, x1, y1 in found:
        cx, cy, side = (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0)
        for scale in scales:
            s = side * scale
            left, top = int(round(max(0, cx - s / 2))), int(round(max(0, cy - s / 2)))
            right, bottom = int(round(min(w, cx + s / 2))), int(round(min(h, cy + s / 2)))
            if right - left >= 8 and bottom - top >= 8:
                rois.append((left, top, right - left, bottom - top))
    return rois


_detectors: dict = {}


def _detector(name: str):
    from ..face import FaceDetector

    if name not in _detectors:
        _detectors[name] = FaceDetector(name, num_threads=1)
    return _detectors[name]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    from ..postprocess import iou_one_to_many

    return float(iou_one_to_many(a, b[None])[0])


def calibration_frames(task: Task, source: str, rgb: np.ndarray):
    """``(label, rgb, roi)`` frames one photo yields for calibration.

    Every photo also yields its mirror image: a cheap second view with the same statistics
    that doubles a small calibration set. The short range detector also sees crops around
    each face (`FACE_CROPS`); the landmark model sees only face crops, at several margins.
    """
    from .calibration import flip

    if task.kind == "face_landmark":
        for i, roi in enumerate(face_rois(rgb, scales=(1.3, LANDMARK_CROP_SCALE, 1.8))):
            yield f"{source}#face{i}", rgb, roi
            mirrored = (rgb.shape[1] - roi[0] - roi[2], roi[1], roi[2], roi[3])
            yield f"{source}#face{i}/flip", flip(rgb), mirrored
        return
    yield source, rgb, None
    yield f"{source}/flip", flip(rgb), None
    if task.face_crops:
        for i, roi in enumerate(face_rois(rgb, scales=task.face_crops)):
            yield f"{source}#crop{i}", rgb, roi


def evaluation_frames(task: Task, source: str, rgb: np.ndarray):
    """``(label, rgb, roi)`` frames a held-aside photo yields for the accuracy report."""
    if task.kind == "face_landmark":
        for i, roi in enumerate(face_rois(rgb)):
            yield f"{source}#face{i}", rgb, roi
        return
    yield source, rgb, None


def _outputs_float(model, outputs: dict) -> dict[str, np.ndarray]:
    specs = {s.name: s for s in model.outputs}
    result = {}
    for name, value in outputs.items():
        q = specs[name].quantization if name in specs else None
        result[name] = q.dequantize(value) if q is not None and value.dtype != np.float32 else value.astype(np.float32)
    return result


# The runtime both models are measured on. `backend="auto"` may take the int8 engine on one
# CPU and LiteRT on another, and their int8 results differ (the engine follows TFLite's
# reference kernels, XNNPACK rounds its own way), so the metrics name theirs: LiteRT, the
# runtime the quantized model is made for.
METRIC_BACKEND = "tflite"


def detection_metric(float_path: Path, int8_path: Path, task: Task, photos) -> dict:
    """Faces the float and int8 detectors find on ``(name, rgb)`` photos, matched by IoU.

    A float face scored within `BORDERLINE` above the threshold is reported but not
    required to be found (its int8 score may land on either side); likewise an int8
    face without a float match counts as extra only if the float model does not score
    it within `BORDERLINE` below the threshold.
    """
    from dataclasses import replace

    from ..face import FaceDetector
    from ..postprocess import iou_one_to_many

    detector = task.detector
    if detector is None:
        raise ValueError(f"a {task.kind} task has no detector layout to measure detections with")
    from ..model import load

    def detector_of(path: Path, config) -> FaceDetector:
        return FaceDetector(load(path, backend=METRIC_BACKEND, num_threads=1), config=config)

    ref = detector_of(float_path, detector)
    threshold = detector.min_score
    lenient = detector_of(float_path, replace(detector, min_score=threshold - BORDERLINE))
    test = detector_of(int8_path, detector)
    per_face, extra, found_float, found_int8 = [], [], 0, 0
    for name, rgb in photos:
        a, b = ref.detect(rgb), test.detect(rgb)
        found_float, found_int8 = found_float + len(a), found_int8 + len(b)
        boxes = np.array([f.box for f in b], np.float64).reshape(-1, 4)
        used = set()
        for i, face in enumerate(a):
            ious = iou_one_to_many(np.asarray(face.box), boxes) if len(b) else np.zeros(0)
            j = int(np.argmax(ious)) if len(ious) else -1
            iou = float(ious[j]) if j >= 0 else 0.0
            if iou > 0:
                used.add(j)
            drift = abs(b[j].score - face.score) if iou > 0 else face.score
            per_face.append(
                {
                    "image": name,
                    "face": i,
                    "iou": iou,
                    "score_float": face.score,
                    "score_drift": float(drift),
                    "borderline": face.score < threshold + BORDERLINE,
                }
            )
        near = np.array([f.box for f in lenient.detect(rgb)], np.float64).reshape(-1, 4)
        for j, face in enumerate(b):
            if j in used:
                continue
            if len(near) and iou_one_to_many(np.asarray(face.box), near).max() >= 0.5:
                continue  # the float model scores this face just under its threshold: borderline
            extra.append({"image": name, "score_int8": face.score, "box": list(face.box)})
    judged = [f for f in per_face if not f["borderline"]]
    return {
        "faces_float": found_float,
        "faces_int8": found_int8,
        "faces_judged": len(judged),
        "faces_matched": sum(f["iou"] >= 0.5 for f in judged),
        "extra_faces": len(extra),
        "min_iou": min((f["iou"] for f in judged), default=1.0),
        "mean_iou": float(np.mean([f["iou"] for f in judged])) if judged else 1.0,
        "max_score_drift": max((f["score_drift"] for f in judged), default=0.0),
        "faces": per_face,
        "extra": extra,
    }


def landmark_metric(float_path: Path, int8_path: Path, task: Task, photos) -> dict:
    """Landmark error of the int8 face mesh, relative to the face size, on the faces of ``photos``."""
    from ..model import load

    errors, flag_drift, faces = [], [], []
    with (
        load(float_path, backend=METRIC_BACKEND, num_threads=1) as ref,
        load(int8_path, backend=METRIC_BACKEND, num_threads=1) as test,
    ):
        for name, rgb in photos:
            for i, roi in enumerate(face_rois(rgb)):
                a = _split_mesh(_outputs_float(ref, ref.run_image(rgb, color="rgb", roi=roi, **task.options)))
                b = _split_mesh(_outputs_float(test, test.run_image(rgb, color="rgb", roi=roi, **task.options)))
                xy_a, xy_b = a[0][:, :2], b[0][:, :2]
                size = float(np.max(xy_a.max(0) - xy_a.min(0)))
                err = float(np.linalg.norm(xy_a - xy_b, axis=1).mean() / max(size, 1e-6))
                drift = abs(_sigmoid(a[1]) - _sigmoid(b[1]))
                errors.append(err)
                flag_drift.append(drift)
                faces.append({"image": name, "face": i, "error_rel": err, "presence_drift": drift})
    return {
        "faces": faces,
        "mean_landmark_error_rel": float(np.mean(errors)) if errors else 0.0,
        "max_landmark_error_rel": float(np.max(errors)) if errors else 0.0,
        "max_presence_drift": float(np.max(flag_drift)) if flag_drift else 0.0,
    }


def _split_mesh(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    mesh = next((v for v in outputs.values() if v.size == LANDMARK_POINTS * 3), None)
    flag = next((v for v in outputs.values() if v.size == 1), None)
    if mesh is None or flag is None:
        from ..errors import InputError

        raise InputError(
            f"a face mesh model with a 1404-value and a 1-value output was expected, got {[v.shape for v in outputs.values()]}"
        )
    return mesh.reshape(LANDMARK_POINTS, 3), float(flag.ravel()[0])


def _sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-np.clip(x, -100, 100))))


def task_metric(float_path: Path, int8_path: Path, task: Task, photos) -> dict | None:
    if task.kind == "face_detection":
        return detection_metric(float_path, int8_path, task, photos)
    if task.kind == "face_landmark":
        return landmark_metric(float_path, int8_path, task, photos)
    return None
