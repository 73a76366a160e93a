"""``edgeinf run PIPELINE.toml --source ...``: run a pipeline, print each frame's results as JSON lines.

edgeinf run examples/face_mesh.toml --source clip.mp4             # every frame of a file
edgeinf run examples/face_mesh.toml --source 0 --frames 100       # a camera, its newest frames
edgeinf run examples/face_mesh.toml --source picamera2
"""

from __future__ import annotations

import json
import math
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a pipeline file on a frame source; one JSON line per frame")
    p.add_argument("pipeline", help="the pipeline's TOML file (see docs/pipeline.md)")
    p.add_argument(
        "--source",
        required=True,
        help="a video file, an image folder, a camera index or /dev/videoN, a URL, gst:<pipeline> or picamera2",
    )
    p.add_argument("--realtime", action="store_true", help="play a file at its frame rate, dropping stale frames")
    p.add_argument("--fps", type=float, help="the pace of --realtime files and of folders")
    p.add_argument("--loop", action="store_true", help="start a file or folder again at its end")
    p.add_argument("--frames", type=int, default=0, help="stop after this many frames (0: until the source ends)")
    p.add_argument("--summary", action="store_true", help="end with a summary line (counts, latency, drops)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import sources
    from ..cli import UsageError
    from .config import load_pipeline

    if args.frames < 0:
        raise UsageError(f"--frames must be >= 0, got {args.frames}")
    if args.fps is not None and not (math.isfinite(args.fps) and args.fps > 0):
        raise UsageError(f"--fps must be a positive number, got {args.fps}")
    options = {}
    spec = args.source
    is_folder = not spec.isdigit() and "://" not in spec and _is_folder(spec)
    if args.loop:
        options["loop"] = True
    if is_folder:
        if args.fps is not None:
            options["fps"] = args.fps
    elif args.realtime or args.fps is not None:
        options.update(realtime=True, fps=args.fps)
    try:
        source = sources.open(spec, **options)
    except sources.SourceError as exc:
        raise UsageError(str(exc)) from None
    completed = 0
    with load_pipeline(args.pipeline) as pipe:
        for result in pipe.run(source, max_frames=args.frames or None):
            print(json.dumps(_strict(result.to_dict())), flush=True)
            completed += 1
    if args.summary:
        summary = {"summary": {**pipe.metrics.summary(), "source": vars(source.stats)}}
        print(json.dumps(_strict(summary)), flush=True)
    return 0 if completed else 1


def _is_folder(spec: str) -> bool:
    from pathlib import Path

    path = Path(spec)
    return path.is_dir() or path.suffix.lower() in (".jpg", ".jpeg", ".png", ".bmp")


def _strict(value):
    """NaN and infinities as null: strict JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return value


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `edgeinf run`")
