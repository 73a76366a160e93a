"""`edgeinf quantize`: a float .tflite in, an int8 .tflite out, with the accuracy it kept.

edgeinf quantize MODEL.tflite --calib DIR|FILE... -o OUT.tflite [--per-channel] [--io int8|uint8|float] [--json]
edgeinf quantize --check OUT.tflite --against MODEL.tflite --calib DIR|FILE... [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import EdgeInfError, InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "quantize",
        help="quantize a float .tflite to int8 on real calibration images and report the accuracy it kept",
        description=__doc__.split("\n\n", 1)[0],
    )
    p.add_argument("model", nargs="?", help="the float .tflite (a path or a manifest name)")
    p.add_argument("--calib", nargs="+", metavar="DIR|FILE", help="calibration images or directories of images")
    p.add_argument("-o", "--output", help="the int8 .tflite to write")
    p.add_argument(
        "--per-channel",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one weight scale per output channel (default; --no-per-channel: one per tensor)",
    )
    p.add_argument("--io", choices=("int8", "uint8", "float"), default="int8", help="input/output type (default int8)")
    p.add_argument("--mean", type=float, nargs="+", help="input normalization (x - mean) / std, in pixel levels")
    p.add_argument("--std", type=float, nargs="+")
    p.add_argument("--letterbox", action="store_true", help="keep the aspect ratio, pad the rest")
    p.add_argument("--resize", choices=("nearest", "bilinear", "area"))
    p.add_argument("--channel-order", choices=("rgb", "bgr"))
    p.add_argument("--strict", action="store_true", help="fail if the quantizer leaves any operator in float")
    p.add_argument("--check", metavar="INT8.tflite", help="report on an existing int8 model instead of quantizing")
    p.add_argument("--against", metavar="FLOAT.tflite", help="with --check: the float model it came from")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _options(args) -> dict | None:
    options = {}
    for key in ("mean", "std", "resize", "channel_order"):
        value = getattr(args, key)
        if value is not None:
            options[key] = value
    if args.letterbox:
        options["letterbox"] = True
    return options or None


def run(args) -> int:
    from . import check_accuracy, quantize

    if not args.calib:
        raise InputError("no calibration images: pass --calib DIR|FILE...")
    if args.check:
        if not args.against:
            raise InputError("--check needs --against FLOAT.tflite: the float model the int8 one came from")
        report = check_accuracy(args.check, args.against, args.calib, options=_options(args))
        print(report.to_json() if args.json else report.to_text())
        return 0
    if not args.model or not args.output:
        raise InputError("expected MODEL.tflite and -o OUT.tflite (or --check INT8.tflite --against FLOAT.tflite)")
    result = quantize(
        args.model,
        args.calib,
        args.output,
        per_channel=args.per_channel,
        io=args.io,
        options=_options(args),
        strict=args.strict,
        progress=None,  # a bar on stderr when it is a terminal; stdout stays clean for --json
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=float))
    else:
        print(f"wrote    {result.output} ({result.samples} calibration inputs from {len(result.calibration)} image(s))")
        print(f"sha256   {result.sha256}")
        if result.report is not None:
            print(result.report.to_text())
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="edgeinf")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["quantize", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except EdgeInfError as exc:
        print(f"edgeinf quantize: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
