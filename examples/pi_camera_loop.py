"""Face detection on a camera loop under a power budget (Raspberry Pi first, any Linux box after).

Frames come from `edgeinf.sources`: the Pi camera's lores stream (picamera2) when it is
there, else an OpenCV camera, else a folder of images (or one image), looped: ``--source
auto`` tries them in that order, so the same script runs on a Pi, a laptop and a CI machine.
A camera source keeps only the newest frame (a slow detector never works on a stale one;
the frames it never saw are counted as dropped), and each frame goes to the detector in
the camera's own format (I420 from the Pi camera) through ``Model.run_image``.

The power budget (``--budget-mw``) is held by one of two policies:

* ``scheduler`` (default when `edgeinf.power` is installed): the variants are profiled
  first (latency and energy per inference, measured with the board's power sensor when
  `edgeinf.power` finds one, else estimated from CPU time), then `edgeinf.power.Scheduler`
  picks, every control period, the variant and the frame rate the budget allows; frames
  above that rate are dropped, as a camera overwrites an unserved frame.
* ``duty``: the first variant on every frame, then a rest long enough that the average
  power stays under the budget. Average power is ``idle + (active - idle) x duty``, so the
  allowed duty is ``(budget - idle) / (active - idle)``; a power sensor's readings correct
  the active-power estimate each frame (closed loop).

    python examples/pi_camera_loop.py --budget-mw 2500                 # on a Pi 5
    python examples/pi_camera_loop.py --source folder --frames 20      # anywhere
    python examples/pi_camera_loop.py --policy duty --variants face_detection_short_range
    python examples/pi_camera_loop.py --metrics-port 9464              # Prometheus on localhost

Prints one line per frame and a summary; ``--json`` prints the summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("pi_camera_loop")


# -- frame sources: edgeinf.sources, frames in the device's own format ---------------------------


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


def open_source(kind: str, folder: Path | None, camera: int):
    """The frame source by name, or the first that works for ``auto``: an `edgeinf.sources.Source`.

    The Pi camera gives its lores stream as I420 and an OpenCV camera BGR: the detector
    takes either as it comes (``run_image`` converts while it resizes), no copy on the way.
    A folder (or one image) is read in name order, looped, every image in turn: the loop
    paces it at ``--fps`` as a camera would.

    Raises:
        SourceError: the source asked for is missing (no picamera2, no images in the folder).
    """
    import edgeinf.sources as sources

    if kind in ("auto", "picamera"):
        try:
            import picamera2  # noqa: F401 - only on a Pi
        except ImportError:
            if kind == "picamera":
                raise sources.SourceError(
                    "picamera2 is not installed: on a Raspberry Pi, `sudo apt install python3-picamera2`"
                ) from None
        else:
            return "picamera2", sources.Picamera2Source(size=(640, 480)).start()
    if kind in ("auto", "opencv") and (kind == "opencv" or _opencv_camera_works(camera)):
        return f"opencv camera {camera}", sources.OpenCVSource(camera).start()
    if folder is None:
        from edgeinf import zoo

        folder = zoo.path("grace_hopper")  # a real photo, fetched once from the package registry
    return f"images in {folder}", sources.ImageFolder(folder, loop=True).start()


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


def power_sensor(root: str = "/"):
    """The board's total power sensor from `edgeinf.power` (None when none is found), and its name."""
    try:
        from edgeinf import power
    except ImportError:
        return None, "none (edgeinf.power not installed)"
    try:
        total = power.discover(root, vcgencmd=None).total
    except Exception as exc:  # a sensor layer failure must not stop the camera loop
        log.warning("power sensor discovery failed: %s", exc)
        total = None
    if total is None:
        return None, "none found"
    return total, getattr(total, "name", "power sensor")


class DutyCyclePolicy:
    """One variant, every frame, then a rest that holds the budget (`DutyCycleBudget`)."""

    name = "duty"

    def __init__(self, variant: str, budget: DutyCycleBudget):
        self.variant = variant
        self.budget = budget

    def choose(self, now: float) -> str | None:
        return self.variant

    def done(self, variant: str, busy_s: float) -> float:
        return self.budget.frame_done(busy_s)

    def skipped(self) -> None:  # never skips
        pass

    def summary(self) -> dict:
        return {
            "duty": self.budget.duty,
            "average_mw_estimated": self.budget.average_mw,
            "active_mw_estimate": self.budget.active_mw,
        }


class SchedulerPolicy:
    """`edgeinf.power.Scheduler`: per control period, a variant and an admission rate for the budget.

    The variants are profiled first (latency and energy per inference; measured with the
    sensor when there is one, else estimated from CPU time). Frames the admission rate
    does not let through are dropped, as a camera overwrites an unserved frame.
    """

    name = "scheduler"

    def __init__(self, variants: dict, budget_mw: float, sensor, threads: int, clock=time.monotonic):
        from edgeinf import power

        quality = {name: (1.0 if i == 0 else 0.9) for i, name in enumerate(variants)}  # the first is preferred
        self.profile = power.profile(variants, threads=(threads,), sensor=sensor, quality=quality, runs=10)
        self.scheduler = power.Scheduler(budget_mw / 1000.0, profile=self.profile, sensor=sensor, clock=clock)
        self.clock = clock
        self._next_step = -math.inf

    def choose(self, now: float) -> str | None:
        sched = self.scheduler
        if now >= self._next_step:
            sched.step(now)
            self._next_step = now + sched.control_period_s
        sched.record_arrivals(1)
        if sched.admit(now):
            return sched.decision.config.variant
        return None

    def done(self, variant: str, busy_s: float) -> float:
        self.scheduler.record(busy_s)
        return 0.0

    def skipped(self) -> None:
        self.scheduler.record_drops(1)

    def summary(self) -> dict:
        self.scheduler.step(self.clock())
        report = self.scheduler.report()
        return {
            "profile_estimated": self.profile.estimated,
            "profile": {
                e.config.variant: {"latency_ms": e.latency_ms, "power_mw": e.power_mw} for e in self.profile.entries
            },
            "scheduler": {
                k: getattr(report, k)
                for k in ("served", "dropped", "mean_power_w", "windows", "windows_over_budget", "config_seconds")
            },
        }


def scheduler_available() -> bool:
    try:
        from edgeinf.power import Scheduler, profile  # noqa: F401
    except ImportError:
        return False
    return True


# -- the loop -----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=("auto", "picamera", "opencv", "folder"), default="auto")
    parser.add_argument("--folder", type=Path, help="images to loop over (default: the Grace Hopper photo)")
    parser.add_argument("--camera", type=int, default=0, help="OpenCV camera index")
    parser.add_argument(
        "--fps", type=float, default=15.0, help="frame rate of a folder source (cameras pace themselves)"
    )
    parser.add_argument("--frames", type=int, default=100, help="frames to take (0: run until interrupted)")
    parser.add_argument(
        "--variants",
        default="face_detection_full_range,face_detection_short_range",
        help="BlazeFace manifest names or paths, most capable first (the duty policy runs the first)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--policy",
        choices=("auto", "scheduler", "duty"),
        default="auto",
        help="scheduler: edgeinf.power picks variant and rate; duty: one variant, rest between frames "
        "(auto: the scheduler when edgeinf.power has it)",
    )
    parser.add_argument("--budget-mw", type=float, default=3000.0, help="average power budget (mW)")
    parser.add_argument("--idle-mw", type=float, default=2000.0, help="duty policy: board power at rest (mW)")
    parser.add_argument("--active-mw", type=float, default=5000.0, help="duty policy: board power while detecting")
    parser.add_argument("--power-root", default="/", help="sysfs root for power sensors (a fake tree in tests)")
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no per-frame lines")
    args = parser.parse_args(argv)

    import edgeinf.metrics
    from edgeinf import zoo
    from edgeinf.face import FaceDetector
    from edgeinf.sources import SourceEnded

    paths = {v: (zoo.path(v) if v in zoo.names() else Path(v)) for v in args.variants.split(",")}
    sensor, sensor_name = power_sensor(args.power_root)
    policy_name = args.policy if args.policy != "auto" else ("scheduler" if scheduler_available() else "duty")
    if policy_name == "scheduler":
        policy = SchedulerPolicy(paths, args.budget_mw, sensor, args.threads)
    else:
        reading = (lambda: sensor.read().power_mw) if sensor is not None else None
        budget = DutyCycleBudget(args.budget_mw, args.idle_mw, args.active_mw, sensor=reading)
        first = next(iter(paths))
        policy = DutyCyclePolicy(first, budget)
        paths = {first: paths[first]}
    detectors = {v: FaceDetector(p, num_threads=args.threads) for v, p in paths.items()}
    name, source = open_source(args.source, args.folder, args.camera)
    exporter = edgeinf.metrics.serve(args.metrics_port) if args.metrics_port is not None else None
    processed: list[tuple[str, int]] = []
    taken = 0
    paced = name.startswith("images")
    start = time.monotonic()
    try:
        while not args.frames or taken < args.frames:
            if paced:  # a folder stands in for a camera: frames arrive at --fps
                time.sleep(max(0.0, start + taken / args.fps - time.monotonic()))
            try:
                frame = source.read()
            except SourceEnded:
                break
            n = taken
            taken += 1
            variant = policy.choose(time.monotonic())
            if variant is None:
                policy.skipped()
                continue
            t0 = time.perf_counter()
            # FaceDetector.detect is Model.run_image (letterbox, resize and colour conversion in
            # one native pass from the frame's own format) followed by the native decoder.
            faces = detectors[variant].detect(frame.data, frame.format)
            busy = time.perf_counter() - t0
            rest = policy.done(variant, busy)
            processed.append((variant, len(faces)))
            if not args.quiet and not args.json:
                best = f" best {faces[0].score:.2f} at {tuple(round(v) for v in faces[0].box)}" if faces else ""
                print(
                    f"frame {n:4d}  {variant}: {len(faces)} face(s){best}  {busy * 1e3:6.2f} ms busy, "
                    f"{rest * 1e3:6.2f} ms rest"
                )
    except KeyboardInterrupt:
        pass
    finally:
        source.close()
        if exporter is not None:
            exporter.close()
    wall = time.monotonic() - start
    latency = [d.model.metrics.snapshot() for d in detectors.values()]
    summary = {
        "source": name,
        "policy": policy.name,
        "power_sensor": sensor_name,
        "budget_mw": args.budget_mw,
        "frames": taken,
        "processed": len(processed),
        "dropped": taken - len(processed),
        "dropped_by_source": source.stats.dropped,  # frames the camera replaced before the loop read them
        "frames_with_faces": sum(1 for _, f in processed if f),
        "variants_used": {v: sum(1 for u, _ in processed if u == v) for v in detectors},
        "fps_processed": len(processed) / wall if wall > 0 else 0.0,
        "inference_p50_ms": {v: s.p50_s * 1e3 for v, s in zip(detectors, latency)},
        **policy.summary(),
    }
    if args.json:
        print(json.dumps(_json_safe(summary), indent=2, default=str))
    else:
        print(
            f"{taken} frames from {name}: {len(processed)} processed ({summary['frames_with_faces']} with faces), "
            f"{summary['dropped']} dropped, {summary['fps_processed']:.1f} fps; policy {policy.name}, budget "
            f"{args.budget_mw:.0f} mW, sensor: {sensor_name}; variants {summary['variants_used']}"
        )
    return 0 if processed else 1


def _json_safe(value):
    """NaN (a percentile before any call, a mean over no window) as null: strict JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
