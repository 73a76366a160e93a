"""Face detection -> 468-point face mesh on a video, with edgeinf's pipeline.

    python examples/face_mesh_video.py clip.mp4                    # every frame of a file
    python examples/face_mesh_video.py clip.mp4 --out annotated.avi
    python examples/face_mesh_video.py 0 --realtime --frames 300   # a USB camera, newest frames only
    python examples/face_mesh_video.py picamera2 --processes       # a Pi camera, a process per core
    python examples/face_mesh_video.py clip.mp4 --threads 2        # whole frames on two threads

Without a source it makes a short clip from the model manifest's real photo. Prints one
line per frame and a summary (frames, drops, latency per stage and end to end).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

import edgeinf.sources as sources
from edgeinf.pipeline.face import face_mesh_pipeline


def demo_clip(path: Path, count: int = 30, size=(640, 360)) -> Path:
    """A pan and zoom over the manifest's real photo (fetched once), as an MJPEG .avi."""
    import cv2
    from PIL import Image

    from edgeinf import zoo

    with Image.open(zoo.path("grace_hopper")) as image:
        bgr = cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR)
    height, width = bgr.shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, size)
    for i in range(count):
        t = i / (count - 1)
        crop_w = int(width * (1.0 - 0.3 * t))
        crop_h = min(height, int(crop_w * size[1] / size[0]))
        x = int((width - crop_w) * (0.5 + 0.2 * np.sin(2 * np.pi * t)))
        writer.write(cv2.resize(bgr[0:crop_h, x : x + crop_w], size, interpolation=cv2.INTER_AREA))
    writer.release()
    return path


def draw(frame, result):
    """The frame as BGR with boxes and mesh points drawn."""
    import cv2

    from edgeinf.pipeline.face import frame_bgr

    image = np.array(frame_bgr(frame))
    if result.stages["faces"].ok:
        for face in result["faces"]:
            x0, y0, x1, y1 = (int(v) for v in face.box)
            cv2.rectangle(image, (x0, y0), (x1, y1), (0, 255, 0), 2)
    if result.stages["landmarks"].ok:
        for mesh in result["landmarks"]:
            for x, y in mesh.points[:, :2].astype(int):
                cv2.circle(image, (int(x), int(y)), 1, (0, 200, 255), -1)
    return image


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", help="video file, folder, camera index, URL, gst:..., picamera2")
    parser.add_argument("--realtime", action="store_true", help="play a file at its frame rate (drops stale frames)")
    layout = parser.add_mutually_exclusive_group()
    layout.add_argument(
        "--processes", action="store_true", help="detection and mesh for whole frames in one process per core"
    )
    layout.add_argument(
        "--threads", type=int, help="detection and mesh for whole frames on this many threads, models of their own"
    )
    parser.add_argument("--frames", type=int, default=0, help="stop after this many frames (0: until the end)")
    parser.add_argument("--timeout", type=float, default=1.0, help="a frame's deadline in seconds")
    parser.add_argument("--out", type=Path, help="write an annotated MJPEG .avi here")
    args = parser.parse_args(argv)

    workdir = tempfile.TemporaryDirectory()
    spec = args.source or str(demo_clip(Path(workdir.name) / "demo.avi"))
    options = {"realtime": True} if args.realtime else {}
    source = sources.open(spec, **options)
    writer = None
    with face_mesh_pipeline(processes=args.processes, threads=args.threads, timeout_s=args.timeout) as pipe:
        for result in pipe.run(source, max_frames=args.frames or None):
            faces = result.stages["faces"]
            meshes = result.stages["landmarks"]
            count = len(faces.value) if faces.ok else 0
            presence = ", ".join(f"{m.presence:.2f}" for m in meshes.value) if meshes.ok else meshes.status
            print(
                f"frame {result.frame.seq:4d}: {count} face(s), mesh presence [{presence}], "
                f"{result.latency_s * 1e3:6.1f} ms from capture"
            )
            if args.out is not None:
                image = draw(result.frame, result)
                if writer is None:
                    import cv2

                    size = (image.shape[1], image.shape[0])
                    writer = cv2.VideoWriter(str(args.out), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, size)
                writer.write(image)
    if writer is not None:
        writer.release()
    summary = pipe.metrics.summary()
    stats = source.stats
    e2e = summary["end_to_end"]
    print(
        f"{summary['frames_completed']} frames answered, {stats.dropped} dropped by the source; end to end "
        f"p50 {e2e['p50_s'] * 1e3:.1f} ms, p99 {e2e['p99_s'] * 1e3:.1f} ms; "
        + "; ".join(
            f"{name}: {s['ok']} ok, {s['timeout']} timeout, {s['error']} error" for name, s in summary["stages"].items()
        )
    )
    workdir.cleanup()
    return 0 if summary["frames_completed"] else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
