"""Face detection on a camera loop under a power budget (Raspberry Pi first, any Linux box after).

Frames come from the Pi camera (picamera2) when it is there, else from an OpenCV camera,
else from a folder of images (or one image), looped: ``--source auto`` tries them in that
order, so the same script runs on a Pi, a laptop and a CI machine.

The power budget is held by duty cycling: after each frame the loop rests long enough
that the average power stays under ``--budget-mw``. Average power is
``idle + (active - idle) x duty``, so the allowed duty is
``(budget - idle) / (active - idle)``. When a power sensor is found (`edgeinf.power`,
when installed), its readings correct the active-power estimate each frame (closed
loop); otherwise the declared ``--idle-mw`` / ``--active-mw`` are used as they are.

    python examples/pi_camera_loop.py --budget-mw 2500                 # on a Pi 5
    python examples/pi_camera_loop.py --source folder --frames 20      # anywhere
    python examples/pi_camera_loop.py --metrics-port 9464              # Prometheus on localhost

Prints one line per frame and a summary; ``--json`` prints the summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

log = logging.getLogger("pi_camera_loop")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


# -- frame sources: each yields HxWx3 uint8 RGB frames ------------------------------------------


def picamera_frames(size=(640, 480)) -> Iterator[np.ndarray]:
    from picamera2 import Picamera2  # only on a Pi

    camera = Picamera2()
    # picamera2's "RGB888" is stored B, G, R in memory (libcamera's naming), hence the flip.
    camera.configure(camera.create_preview_configuration(main={"format": "RGB888", "size": size}))
    camera.start()
    try:
        while True:
            yield np.ascontiguousarray(camera.capture_array()[:, :, ::-1])
    finally:
        camera.stop()


def opencv_frames(index: int = 0) -> Iterator[np.ndarray]:
    import cv2

    capture = cv2.VideoCapture(index)
    try:
        while True:
            ok, bgr = capture.read()
            if not ok:
                return
            yield cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    finally:
        capture.release()


def folder_frames(path: Path) -> Iterator[np.ndarray]:
    """Every image of a folder (or one image), in name order, looped forever."""
    from PIL import Image

    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {path}")
    images = [np.asarray(Image.open(f).convert("RGB")) for f in files]
    while True:
        yield from images


def _opencv_camera_works(index: int) -> bool:
    try:
        import cv2
    except ImportError:
        return False
    capture = cv2.VideoCapture(index)
    try:
        return bool(capture.isOpened() and capture.read()[0])
    finally:
        capture.release()


def open_source(kind: str, folder: Path | None, camera: int) -> tuple[str, Iterator[np.ndarray]]:
    """The frame source by name, or the first that works for ``auto``."""
    if kind in ("auto", "picamera"):
        try:
            import picamera2  # noqa: F401

            return "picamera2", picamera_frames()
        except ImportError:
            if kind == "picamera":
                raise
    if kind in ("auto", "opencv") and (kind == "opencv" or _opencv_camera_works(camera)):
        return f"opencv camera {camera}", opencv_frames(camera)
    if folder is None:
        from edgeinf import zoo

        folder = zoo.path("grace_hopper")  # a real photo, fetched once from the package registry
    return f"images in {folder}", folder_frames(folder)


# -- the power budget -----------------------------------------------------------------------------


class DutyCycleBudget:
    """Rest after each frame so that the average power stays under the budget.

    Args:
        budget_mw: the average power allowed.
        idle_mw: power while the loop rests.
        active_mw: power while a frame is processed (corrected by ``sensor`` when given).
        sensor: returns the measured board power in mW, or None; read once per frame.
        sleep, clock: injected so the controller runs the same in tests.
    """

    def __init__(
        self,
        budget_mw: float,
        idle_mw: float,
        active_mw: float,
        sensor: Callable[[], float | None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not idle_mw < active_mw:
            raise ValueError(f"idle power must be below active power, got idle {idle_mw} mW, active {active_mw} mW")
        if budget_mw <= idle_mw:
            raise ValueError(f"the budget ({budget_mw} mW) must exceed the idle power ({idle_mw} mW)")
        self.budget_mw, self.idle_mw, self.active_mw = budget_mw, idle_mw, active_mw
        self.sensor, self.sleep, self.clock = sensor, sleep, clock
        self.busy_s = 0.0
        self.rest_s = 0.0
        self.energy_mj = 0.0  # estimated millijoules over busy + rest time

    @property
    def duty(self) -> float:
        """The share of time the loop may be busy."""
        return min(1.0, (self.budget_mw - self.idle_mw) / (self.active_mw - self.idle_mw))

    def frame_done(self, busy_s: float) -> float:
        """Account one frame that took ``busy_s``; rest as needed. Returns the rest in seconds."""
        if self.sensor is not None:
            measured = self.sensor()
            if measured is not None and measured > self.idle_mw:
                # Readings taken right after the work describe it: move the estimate towards them.
                self.active_mw = 0.8 * self.active_mw + 0.2 * measured
        rest = busy_s * (1.0 / self.duty - 1.0) if self.duty < 1.0 else 0.0
        if rest > 0:
            self.sleep(rest)
        self.busy_s += busy_s
        self.rest_s += rest
        self.energy_mj += self.active_mw * busy_s + self.idle_mw * rest
        return rest

    @property
    def average_mw(self) -> float:
        total = self.busy_s + self.rest_s
        return self.energy_mj / total if total > 0 else float("nan")


def power_sensor(root: str = "/") -> tuple[Callable[[], float | None] | None, str]:
    """The board's total power from `edgeinf.power` when it is installed and finds a sensor."""
    try:
        from edgeinf import power
    except ImportError:
        return None, "none (edgeinf.power not installed): declared idle/active power"
    try:
        total = power.discover(root, vcgencmd=None).total
    except Exception as exc:  # a sensor layer failure must not stop the camera loop
        log.warning("power sensor discovery failed: %s", exc)
        total = None
    if total is None:
        return None, "none found: declared idle/active power"
    return (lambda: total.read().power_mw), getattr(total, "name", "power sensor")


# -- the loop -----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=("auto", "picamera", "opencv", "folder"), default="auto")
    parser.add_argument("--folder", type=Path, help="images to loop over (default: the Grace Hopper photo)")
    parser.add_argument("--camera", type=int, default=0, help="OpenCV camera index")
    parser.add_argument("--frames", type=int, default=100, help="frames to process (0: run until interrupted)")
    parser.add_argument("--model", default="face_detection_short_range", help="BlazeFace manifest name or path")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--budget-mw", type=float, default=3000.0, help="average power budget (mW)")
    parser.add_argument("--idle-mw", type=float, default=2000.0, help="board power at rest (mW; Pi 5 ~2 W)")
    parser.add_argument("--active-mw", type=float, default=5000.0, help="board power while detecting (mW)")
    parser.add_argument("--power-root", default="/", help="sysfs root for power sensors (a fake tree in tests)")
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no per-frame lines")
    args = parser.parse_args(argv)

    import edgeinf.metrics
    from edgeinf import zoo
    from edgeinf.face import FaceDetector

    model = args.model if args.model in zoo.names() else Path(args.model)
    detector = FaceDetector(model, num_threads=args.threads)
    name, frames = open_source(args.source, args.folder, args.camera)
    sensor, sensor_name = power_sensor(args.power_root)
    budget = DutyCycleBudget(args.budget_mw, args.idle_mw, args.active_mw, sensor=sensor)
    exporter = edgeinf.metrics.serve(args.metrics_port) if args.metrics_port is not None else None
    faces_seen = []
    start = time.monotonic()
    try:
        for n, rgb in enumerate(frames):
            if args.frames and n >= args.frames:
                break
            t0 = time.perf_counter()
            faces = detector.detect(rgb)
            busy = time.perf_counter() - t0
            rest = budget.frame_done(busy)
            faces_seen.append(len(faces))
            if not args.quiet and not args.json:
                best = f" best {faces[0].score:.2f} at {tuple(round(v) for v in faces[0].box)}" if faces else ""
                print(f"frame {n:4d}  {len(faces)} face(s){best}  {busy * 1e3:6.2f} ms busy, {rest * 1e3:6.2f} ms rest")
    except KeyboardInterrupt:
        pass
    finally:
        if exporter is not None:
            exporter.close()
    wall = time.monotonic() - start
    snap = detector.model.metrics.snapshot()
    summary = {
        "source": name,
        "power_sensor": sensor_name,
        "frames": len(faces_seen),
        "frames_with_faces": sum(1 for f in faces_seen if f),
        "fps": len(faces_seen) / wall if wall > 0 else 0.0,
        "budget_mw": args.budget_mw,
        "duty": budget.duty,
        "average_mw_estimated": budget.average_mw,
        "active_mw_estimate": budget.active_mw,
        "inference_p50_ms": snap.p50_s * 1e3,
        "inference_p95_ms": snap.p95_s * 1e3,
        "model": str(detector.model.path.name),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{summary['frames']} frames from {name}: {summary['frames_with_faces']} with faces, "
            f"{summary['fps']:.1f} fps, duty {budget.duty:.2f}, ~{budget.average_mw:.0f} mW average "
            f"(budget {args.budget_mw:.0f} mW; sensor: {sensor_name}); inference p50 {summary['inference_p50_ms']:.2f} ms"
        )
    return 0 if faces_seen else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
