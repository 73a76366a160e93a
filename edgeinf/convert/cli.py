"""`edgeinf convert MODEL.onnx --to ncnn|tflite -o DIR [--input-shape ...] [--fp16] [--json]`.

Exit codes: 0 converted, runs on its runtime and within the tolerance; 1 the conversion
failed, the result does not run, or its outputs differ beyond the tolerance; 2 the input
or the arguments are wrong, or the converter is not installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_PASSED, EXIT_FAILED = 0, 1


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _cosine(text: str) -> float:
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"a cosine is at most 1, got {text!r}")
    return value


def add_parser(subparsers) -> None:
    from ..cli import positive_int
    from ..model import MAX_THREADS

    p = subparsers.add_parser(
        "convert",
        help="convert an ONNX model to NCNN (pnnx) or TFLite (onnx2tf), then check and verify the result",
        description=(
            "Convert an .onnx model, check the result for its runtime, and compare its outputs with the ONNX "
            "model on ONNX Runtime on the same real inputs. Exit code 0: passed; 1: conversion, check or "
            "verification failed; 2: bad input or converter not installed."
        ),
    )
    p.add_argument("model", help="an .onnx file or a manifest name")
    p.add_argument("--to", required=True, choices=["ncnn", "tflite"], help="the format to convert to")
    p.add_argument("-o", "--out", required=True, help="folder for the converted files (created if missing)")
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="[NAME:]DIMS",
        help="fixed size of an input, e.g. 1,3,48,192 or x:1,3,48,192 (repeat per input); needed for "
        "dynamic dimensions other than the batch",
    )
    p.add_argument("--fp16", action="store_true", help="float16 weights (NCNN also computes in fp16)")
    p.add_argument("--atol", type=_positive_float, default=None, help="largest absolute error allowed per output")
    p.add_argument("--min-cosine", type=_cosine, default=None, help="smallest cosine similarity allowed per output")
    p.add_argument("--image", action="append", default=[], help="a photo to verify with (repeatable)")
    p.add_argument("--no-verify", action="store_true", help="convert and check only")
    p.add_argument("--threads", type=positive_int(MAX_THREADS), default=1, help="threads while verifying")
    p.add_argument("--pnnx", default=None, help="the pnnx executable (default: the installed pnnx package's)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema edgeinf.convert/1)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import UsageError
    from . import Tolerance, convert

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, expected a folder")
    for image in args.image:
        if not Path(image).is_file():
            raise UsageError(f"--image {image}: no such file")
    tolerance = None
    if args.atol is not None or args.min_cosine is not None:
        default = Tolerance.default(args.fp16)
        tolerance = Tolerance(
            atol=default.atol if args.atol is None else args.atol,
            min_cosine=default.min_cosine if args.min_cosine is None else args.min_cosine,
        )
    report = convert(
        args.model,
        args.to,
        out,
        input_shapes=args.input_shape,
        fp16=args.fp16,
        verify=not args.no_verify,
        tolerance=tolerance,
        images=args.image,
        num_threads=args.threads,
        pnnx=args.pnnx,
    )
    print(report.to_json() if args.json else report.to_text())
    sys.stdout.flush()
    return EXIT_PASSED if report.passed else EXIT_FAILED
