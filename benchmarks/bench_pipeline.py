"""Face detection -> face mesh on 720p video: edgeinf's pipeline against a plain Python loop.

Contenders, interleaved round by round on the same frames (a pan and zoom over the
manifest's real photo, 1280x720 BGR):

- plain loop: OpenCV letterbox + normalization, the detector, decoding and weighted NMS
  (the numpy reference in tests/face_reference.py), an OpenCV rotated crop, the mesh model; one frame at a
  time on one thread.
- pipeline, 1 process: `edgeinf.pipeline.face.face_mesh_pipeline()`: the detector and the
  mesh on their own threads, frames overlapping (the runtimes release the GIL).
- pipeline, 2 processes: the same with the mesh stage in a child process, frames through
  shared memory.

Every model runs with 1 thread. Frames are offered as fast as the contender takes them
(the pipeline takes a new one when it has room); throughput is frames per second of wall
time, latency is per frame from submission to answer (p50 / p99).

Usage: PYTHONPATH=. python benchmarks/bench_pipeline.py [--frames 120] [--rounds 3] [--json out.json] [--quick]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import face_reference  # noqa: E402

import edgeinf  # noqa: E402
from edgeinf import face, zoo  # noqa: E402
from edgeinf.bench import document, write_document  # noqa: E402
from edgeinf.pipeline.face import FaceLandmarks, crop, face_crop_rect, face_mesh_pipeline  # noqa: E402
from edgeinf.preprocess import Letterbox  # noqa: E402

W, H = 1280, 720


def video(count: int) -> list[np.ndarray]:
    """720p BGR frames panning and zooming over the real photo."""
    with Image.open(zoo.path("grace_hopper")) as image:
        bgr = cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR)
    height, width = bgr.shape[:2]
    frames = []
    for i in range(count):
        t = i / max(1, count - 1)
        crop_w = int(width * (1.0 - 0.3 * t))
        crop_h = min(height, int(crop_w * H / W))
        x = int((width - crop_w) * (0.5 + 0.2 * math.sin(2 * math.pi * t)))
        y = int((height - crop_h) * 0.3)
        frames.append(cv2.resize(bgr[y : y + crop_h, x : x + crop_w], (W, H), interpolation=cv2.INTER_LINEAR))
    return frames


class PlainLoop:
    """The two models as an app writes them today: OpenCV preprocessing, one frame at a time."""

    def __init__(self):
        self.detector = edgeinf.load("face_detection_short_range", num_threads=1)
        self.mesh = edgeinf.load("face_landmark", num_threads=1)
        self.config = face.SHORT_RANGE
        self.anchors = face_reference.anchor_centres(self.config)
        self.canvas = np.zeros((1, 128, 128, 3), np.float32)

    def __call__(self, bgr: np.ndarray):
        size = self.config.input_size
        scale = size / max(bgr.shape[:2])
        nw, nh = round(bgr.shape[1] * scale), round(bgr.shape[0] * scale)
        small = cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_AREA)
        rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
        pad_x, pad_y = (size - nw) // 2, (size - nh) // 2
        self.canvas.fill(-1.0)
        self.canvas[0, pad_y : pad_y + nh, pad_x : pad_x + nw] = rgb / 127.5 - 1.0
        outputs = self.detector.run(self.canvas)
        by_width = {v.shape[-1]: v for v in outputs.values()}
        boxes, keypoints, scores = face_reference.decode(by_width[16], by_width[1], self.anchors, self.config)
        h, w = bgr.shape[:2]
        letterbox = Letterbox(scale, scale, pad_x, pad_y, nw, nh, 0, 0, w, h, size, size)
        meshes = []
        for box, kps, score in face_reference.weighted_nms(boxes, keypoints, scores, self.config.iou_threshold):
            corners = letterbox.to_source(box, normalized=True)
            detected = face.Face(tuple(float(v) for v in corners), score, letterbox.to_source(kps, normalized=True))
            rect = face_crop_rect(detected)
            patch = cv2.cvtColor(crop(bgr, rect, 192), cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0
            out = self.mesh.run(patch[None])
            raw = next(v for v in out.values() if v.shape[-1] == 1404).reshape(-1, 3)
            points = raw.copy()
            points[:, :2] = rect.to_frame(raw[:, :2], 192)
            meshes.append(FaceLandmarks(points, 1.0, rect))
        return meshes


def run_plain(loop: PlainLoop, frames) -> dict:
    latencies = []
    start = time.perf_counter()
    faces = 0
    for bgr in frames:
        t0 = time.perf_counter()
        faces += len(loop(bgr))
        latencies.append(time.perf_counter() - t0)
    return summary(len(frames), time.perf_counter() - start, latencies, faces)


def run_pipeline(pipe, frames) -> dict:
    futures = []
    start = time.perf_counter()
    for bgr in frames:
        futures.append(pipe.submit(bgr, format="bgr"))  # waits for room; the latency starts once admitted
    results = [f.result() for f in futures]
    wall = time.perf_counter() - start
    bad = [r for r in results if not r.ok]
    if bad:
        raise RuntimeError(f"{len(bad)} frames failed: {bad[0].stages}")
    faces = sum(len(r["landmarks"]) for r in results)
    return summary(len(frames), wall, [r.latency_s for r in results], faces)


def summary(count: int, wall: float, latencies, faces: int) -> dict:
    ms = np.array(latencies) * 1e3
    return {
        "fps": count / wall,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "faces": faces,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--quick", action="store_true", help="a smoke run (10 frames, 1 round): not for the report")
    args = parser.parse_args()
    if args.quick:
        args.frames, args.rounds = 10, 1
    frames = video(args.frames)
    plain = PlainLoop()
    contenders = {
        "plain loop": lambda: run_plain(plain, frames),
        "pipeline, 1 process": None,
        "pipeline, 2 processes": None,
    }
    pipes = {
        "pipeline, 1 process": face_mesh_pipeline(processes=False).start(),
        "pipeline, 2 processes": face_mesh_pipeline(processes=True).start(),
    }
    for name, pipe in pipes.items():
        contenders[name] = lambda pipe=pipe: run_pipeline(pipe, frames)
    for run in contenders.values():  # warm-up: caches, first-call allocations
        run()
    rounds = {name: [] for name in contenders}
    try:
        for _ in range(args.rounds):
            for name, run in contenders.items():
                rounds[name].append(run())
    finally:
        for pipe in pipes.values():
            pipe.close()
    rows = []
    base = np.median([r["fps"] for r in rounds["plain loop"]])
    for name, results in rounds.items():
        fps = float(np.median([r["fps"] for r in results]))
        rows.append(
            {
                "contender": name,
                "fps": fps,
                "speedup": fps / base,
                "p50_ms": float(np.median([r["p50_ms"] for r in results])),
                "p99_ms": float(np.median([r["p99_ms"] for r in results])),
                "faces": results[0]["faces"],
            }
        )
    print(f"{'contender':24s} {'fps':>7s} {'x plain':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'faces':>6s}")
    for row in rows:
        print(
            f"{row['contender']:24s} {row['fps']:7.1f} {row['speedup']:8.2f} {row['p50_ms']:8.1f} "
            f"{row['p99_ms']:8.1f} {row['faces']:6d}"
        )
    if args.json:
        report = document(
            "pipeline",
            "Face detection -> face mesh on 720p video: pipeline vs plain loop (1 thread per model)",
            frames=args.frames,
            rounds=args.rounds,
            rows=rows,
        )
        write_document(report, args.json)


if __name__ == "__main__":
    main()
