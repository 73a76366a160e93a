"""The reference pipeline: BlazeFace detection, then the face mesh on each face's crop.

The crop follows MediaPipe's face landmark graph: a square around the detection box,
grown 1.5x on its long side, rotated so that the eyes are level, resampled to the
landmark model's 192x192 input with values in [0, 1]. Landmarks are mapped back through
the same rotation into frame pixels. For packed frames (BGR, RGB, BGRA, RGBA) and a
float input, one native pass (``edgeinf._C.warp_affine``: bilinear, black outside the
frame, as OpenCV's ``warpAffine``) writes the crop straight into the model's input where
that pass is vectorized (AVX2, and the VNNI paths built on it); other frames and platforms go through OpenCV.

The stage callables are built by factories so that a process stage builds its own
models in its own process: ``ProcessStage("edgeinf.pipeline.face:landmark_stage")``.

On several cores, `face_mesh_pipeline(processes=N)` runs the whole chain for one frame in
one of N processes (`face_mesh_stage`): the detector and the mesh model cost about the
same, so whole frames split evenly over the cores where the two stages never quite do,
and a frame crosses a process boundary once instead of once per face.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..face import Face
from ..sources import Frame

CROP_SCALE = 1.5
"""How much larger than the detection box the landmark crop is (MediaPipe's scale_x/scale_y)."""


@dataclass(frozen=True)
class RotatedRect:
    """A square crop in frame pixels: centre, side and rotation (radians, counter-clockwise positive)."""

    center_x: float
    center_y: float
    size: float
    rotation: float

    def corners(self) -> np.ndarray:
        """Top-left, top-right and bottom-left corners of the crop, as (3, 2) frame pixels."""
        c, s = math.cos(self.rotation), math.sin(self.rotation)
        half = self.size / 2.0
        local = np.array([[-half, -half], [half, -half], [-half, half]])
        rotation = np.array([[c, -s], [s, c]])
        return local @ rotation.T + (self.center_x, self.center_y)

    def to_frame(self, points: np.ndarray, crop_size: int) -> np.ndarray:
        """Crop pixel coordinates (..., 2) to frame pixels."""
        c, s = math.cos(self.rotation), math.sin(self.rotation)
        local = (points / crop_size - 0.5) * self.size
        rotation = np.array([[c, -s], [s, c]])
        return local @ rotation.T + (self.center_x, self.center_y)


def face_crop_rect(face: Face) -> RotatedRect:
    """MediaPipe's landmark crop for a detection: box centre, eyes level, long side x1.5.

    The rotation turns the vector from the right eye (keypoint 0) to the left eye
    (keypoint 1) to horizontal, as MediaPipe's detection-to-rect step does.
    """
    xmin, ymin, xmax, ymax = face.box
    (rx, ry), (lx, ly) = face.keypoints[0], face.keypoints[1]
    angle = -math.atan2(-(ly - ry), lx - rx)
    rotation = angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))
    side = max(xmax - xmin, ymax - ymin) * CROP_SCALE
    return RotatedRect((xmin + xmax) / 2.0, (ymin + ymax) / 2.0, side, rotation)


def crop_matrix(rect: RotatedRect, size: int) -> tuple[float, ...]:
    """The map from crop pixels to frame pixels as (m0, m1, m2, m3, m4, m5).

    Crop pixel (x, y) lies at frame position (m0 x + m1 y + m2, m3 x + m4 y + m5): the
    inverse of the transform `crop` hands to OpenCV.
    """
    top_left, top_right, bottom_left = rect.corners()
    ux, uy = (top_right - top_left) / size
    vx, vy = (bottom_left - top_left) / size
    return (float(ux), float(vx), float(top_left[0]), float(uy), float(vy), float(top_left[1]))


# Packed formats the native crop reads: the bytes of R, G and B in a pixel.
_PACKED_RGB = {"bgr": (2, 1, 0), "rgb": (0, 1, 2), "bgra": (2, 1, 0), "rgba": (0, 1, 2)}
_NATIVE_MAX_SIDE = 8192  # the native crop's largest frame side (warp_affine.h)


def _native_crop_vectorized() -> bool:
    """Whether the native crop runs vectorized: on AVX2 and the paths built on it (edgeinf.isa).
    Elsewhere OpenCV's warpAffine (vectorized on every platform) is faster than the native
    scalar reference."""
    from ..isa import AVX2_PATHS, active_isa  # the native module, imported on the first crop, not with this module

    return active_isa() in AVX2_PATHS


def frame_bgr(frame: Frame) -> np.ndarray:
    """The frame as BGR pixels (a view when it already is BGR)."""
    import cv2

    if frame.format == "bgr":
        return frame.data
    if frame.format == "rgb":
        return cv2.cvtColor(frame.data, cv2.COLOR_RGB2BGR)
    if frame.format == "gray":
        return cv2.cvtColor(frame.data, cv2.COLOR_GRAY2BGR)
    codes = {
        "i420": cv2.COLOR_YUV2BGR_I420,
        "nv12": cv2.COLOR_YUV2BGR_NV12,
        "nv21": cv2.COLOR_YUV2BGR_NV21,
        "yuyv": cv2.COLOR_YUV2BGR_YUYV,
    }
    if frame.format not in codes:
        raise InputError(f"cannot crop a {frame.format!r} frame: expected one of bgr, rgb, gray, {sorted(codes)}")
    return cv2.cvtColor(np.ascontiguousarray(frame.data), codes[frame.format])


def crop(image_bgr: np.ndarray, rect: RotatedRect, size: int) -> np.ndarray:
    """The rotated square ``rect`` of a BGR image, resampled to size x size (black outside)."""
    import cv2

    target = np.array([[0, 0], [size, 0], [0, size]], np.float32)
    matrix = cv2.getAffineTransform(rect.corners().astype(np.float32), target)
    return cv2.warpAffine(image_bgr, matrix, (size, size), flags=cv2.INTER_LINEAR, borderValue=(0, 0, 0))


@dataclass(frozen=True)
class FaceLandmarks:
    """The face mesh of one face.

    Attributes:
        points: (468, 3) float32: x, y in frame pixels, z (depth) in the same scale.
        presence: the model's confidence that the crop holds a face, in [0, 1].
        rect: the crop it came from.
        face: the detection the crop was made from.
    """

    points: np.ndarray
    presence: float
    rect: RotatedRect
    face: Face | None = None

    def to_dict(self) -> dict:
        return {"presence": self.presence, "points": np.round(self.points, 2).tolist()}


class FaceLandmarker:
    """The face mesh model on a rotated crop (see `face_crop_rect`).

    Args:
        model: a loaded `Model`, a path, or a manifest name (default ``face_landmark``).
        num_threads: runtime threads when it loads the model itself.
    """

    def __init__(self, model="face_landmark", num_threads: int | None = 1):
        import cv2  # noqa: F401  # the crop's: imported while the stage is built, not on its first frame

        from ..model import Model, load

        self.model = model if isinstance(model, Model) else load(model, num_threads=num_threads)
        shape = tuple(self.model.inputs[0].shape)
        if len(shape) != 4 or shape[1] != shape[2] or shape[3] != 3:
            raise InputError(f"a face landmark model with a square 1xNxNx3 input was expected, got {shape}")
        self.size = shape[1]
        self._points = next(s.name for s in self.model.outputs if s.shape[-1] % 3 == 0 and s.shape[-1] > 3)
        self._presence = next(s.name for s in self.model.outputs if s.shape[-1] == 1)
        self._native = np.dtype(self.model.inputs[0].dtype) == np.float32

    def __call__(self, frame: Frame, face: Face) -> FaceLandmarks:
        rect = face_crop_rect(face)
        data = frame.data
        if (
            self._native
            and frame.format in _PACKED_RGB
            and max(data.shape[:2]) <= _NATIVE_MAX_SIDE
            and _native_crop_vectorized()
        ):
            outputs = self._run_on_native_crop(data, _PACKED_RGB[frame.format], rect)
        else:
            patch = crop(frame_bgr(frame), rect, self.size)
            outputs = self.model.run_image(patch, color="bgr", mean=0.0, std=255.0)
        raw = np.asarray(outputs[self._points], np.float32).reshape(-1, 3)
        points = np.empty_like(raw)
        points[:, :2] = rect.to_frame(raw[:, :2], self.size)
        points[:, 2] = raw[:, 2] * rect.size / self.size
        logit = float(np.asarray(outputs[self._presence]).reshape(-1)[0])
        presence = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
        return FaceLandmarks(points, presence, rect, face)

    def _run_on_native_crop(self, image: np.ndarray, rgb_bytes: tuple[int, int, int], rect: RotatedRect) -> dict:
        """The crop, in [0, 1], written into the model's input memory; then the model."""
        from .. import _C

        size, model = self.size, self.model
        args = (crop_matrix(rect, size), rgb_bytes, (1 / 255.0,) * 3, (0.0,) * 3)
        with model.exclusive():  # from the fill to the outputs: no other thread's input in between
            buffer = model.input_buffer(0)
            if buffer.dtype == np.float32 and buffer.shape[-3:] == (size, size, 3) and buffer.flags.c_contiguous:
                _C.warp_affine(image, buffer, *args)
                del buffer  # TFLite refuses to invoke while a view of its input memory is alive
                return model.invoke()
            del buffer
            tensor = np.empty((1, size, size, 3), np.float32)  # a runtime without a matching buffer
            _C.warp_affine(image, tensor, *args)
            return model.run(tensor)


class FaceDetection:
    """BlazeFace on the frame as it comes: ``fn(frame) -> list[Face]``.

    Args:
        model: a path or a manifest name (default ``face_detection_short_range``).
        num_threads: runtime threads of the model.
    """

    def __init__(self, model: str = "face_detection_short_range", num_threads: int | None = 1):
        from ..face import FaceDetector

        self.detector = FaceDetector(model, num_threads=num_threads)
        self.model = self.detector.model

    def __call__(self, frame: Frame) -> list[Face]:
        return self.detector.detect(frame.data, frame.format)


def detection_stage(model: str = "face_detection_short_range", num_threads: int | None = 1) -> FaceDetection:
    """A stage callable ``fn(frame) -> list[Face]`` (BlazeFace on the frame as it comes)."""
    return FaceDetection(model, num_threads=num_threads)


def landmark_stage(model: str = "face_landmark", num_threads: int | None = 1) -> FaceLandmarker:
    """A stage callable ``fn(frame, face) -> FaceLandmarks``, for ``for_each`` over the faces."""
    return FaceLandmarker(model, num_threads=num_threads)


def face_mesh_stage(
    detector: str = "face_detection_short_range", landmarks: str = "face_landmark", num_threads: int | None = 1
):
    """A stage callable ``fn(frame) -> list[FaceLandmarks]``: detection, then the mesh of each face.

    The whole chain for one frame, for a process that serves whole frames; each mesh
    carries its detection (`FaceLandmarks.face`).
    """
    detect = detection_stage(detector, num_threads=num_threads)
    landmark = landmark_stage(landmarks, num_threads=num_threads)

    def face_mesh(frame: Frame) -> list[FaceLandmarks]:
        return [landmark(frame, face) for face in detect(frame)]

    return face_mesh


def faces_of(frame: Frame, meshes: list[FaceLandmarks]) -> list[Face]:
    """The detections behind a frame's meshes (the ``faces`` stage after `face_mesh_stage`)."""
    return [mesh.face for mesh in meshes if mesh.face is not None]


def face_mesh_pipeline(
    *,
    processes: bool | int = False,
    threads: int | None = None,
    timeout_s: float | None = None,
    num_threads: int = 1,
    max_in_flight: int | None = None,
    pacing: bool = False,
):
    """The reference pipeline: ``faces`` (list[Face]) and ``landmarks`` (a `FaceLandmarks` per face).

    Args:
        processes: False: the detector and the mesh on their own threads of this process,
            frame N+1 detected while frame N's faces are meshed (the crop uses OpenCV:
            ``cv2.setNumThreads(1)`` keeps its pool off the stages' cores). An integer N (True: one per
            usable core): N child processes, each running detection and mesh for whole
            frames (`face_mesh_stage`), N frames in flight; ``faces`` is then taken from the
            meshes.
        threads: instead of processes, N threads of this process each running detection
            and mesh for whole frames with models of their own (`ThreadStage`), N frames
            in flight: no frame copy and no pipe, one thread hand-off per frame; the
            Python steps between the models take turns on the GIL.
        timeout_s: the frame's deadline.
        num_threads: runtime threads per model.
        max_in_flight: frames inside at once (`Pipeline`); default one per worker: two
            threads, or one frame per process.
        pacing: admit a frame only once it is predicted to pass every stage unqueued (`Pipeline`).

    Raises:
        InputError: ``processes`` is neither a bool nor a positive integer, ``threads`` is not
            a positive integer, or both are given.
    """
    from ..model import default_threads
    from .core import Pipeline, ThreadStage
    from .process import ProcessStage

    options = {"num_threads": num_threads}
    chain: ThreadStage | ProcessStage
    if threads is not None:
        if type(threads) is not int or not 1 <= threads <= 64:
            raise InputError(f"threads must be an integer from 1 to 64, got {threads!r}")
        if processes not in (False, 0):
            raise InputError(f"give threads or processes, not both (threads={threads!r}, processes={processes!r})")
        chain, workers = ThreadStage(face_mesh_stage, options=options), threads
    else:
        if processes is True:
            processes = min(default_threads(), 64)
        if processes is False or (type(processes) is int and processes == 0):
            pipe = Pipeline("face_mesh", timeout_s=timeout_s, max_in_flight=max_in_flight, pacing=pacing)
            pipe.add("faces", detection_stage(num_threads=num_threads))
            pipe.add("landmarks", landmark_stage(num_threads=num_threads), inputs=["faces"], for_each="faces")
            return pipe
        if not isinstance(processes, int) or not 1 <= processes <= 64:
            raise InputError(f"processes must be False, True or an integer from 1 to 64, got {processes!r}")
        chain, workers = ProcessStage("edgeinf.pipeline.face:face_mesh_stage", options=options), processes
    # Whole frames per worker, by default one each in flight: a frame never waits behind another one's chain.
    in_flight = workers if max_in_flight is None else max_in_flight
    pipe = Pipeline("face_mesh", timeout_s=timeout_s, max_in_flight=in_flight, pacing=pacing)
    pipe.add("landmarks", chain, workers=workers)
    pipe.add("faces", faces_of, inputs=["landmarks"], inline=True)  # no thread hand-off for a list
    return pipe
