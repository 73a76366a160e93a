"""`edgeinf check MODEL [--backend B] [--target T] [--json]`, `edgeinf check --list-targets`.

Exit codes, for CI: 0 the model runs on every backend checked (verdict YES or PARTIAL),
1 it does not run on at least one, 2 the input is unreadable (missing, corrupt,
truncated, unknown kind) or the arguments are wrong.
"""

from __future__ import annotations

import json
import os
import sys

EXIT_RUNS, EXIT_DOES_NOT_RUN, EXIT_UNREADABLE = 0, 1, 2


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "check",
        help="check every operator of a model against a runtime (no runtime is imported)",
        description=(
            "Check a .tflite, NCNN .param or .onnx model node by node against a runtime's probed support "
            "tables. Exit code 0: runs; 1: does not run; 2: unreadable input."
        ),
    )
    p.add_argument(
        "model",
        nargs="?",
        help="a .tflite, an NCNN .param (with its .bin beside it) or an .onnx file, or a manifest name",
    )
    p.add_argument(
        "--backend",
        choices=["tflite", "ncnn", "onnxruntime", "edgeinf"],
        default=None,
        help="check only this backend; edgeinf: which operators the int8 engine runs and which go to LiteRT, and why",
    )
    p.add_argument(
        "--target",
        default=None,
        help="runtime and version to check against, e.g. tflite-runtime==2.14, ai-edge-litert, ncnn, onnxruntime "
        "(default: the installed one); --list-targets shows the choices",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema edgeinf.compat/1)")
    p.add_argument("--list-targets", action="store_true", help="list the runtimes edgeinf has tables for and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import BackendUnavailableError, ModelFileError
    from . import check, tables

    if getattr(args, "list_targets", False):
        for t in tables.all_targets():
            print(t)
        return EXIT_RUNS
    if args.model is None:
        _error(args, "usage", "the following arguments are required: model (or --list-targets)")
        return EXIT_UNREADABLE
    model = args.model
    if not os.path.exists(model):
        from .. import zoo

        if model in zoo.names():  # a manifest name, as the other subcommands take
            model = zoo.path(model)
    if args.backend == "edgeinf":
        return _run_engine_check(args, model)
    try:
        report = check(model, backend=args.backend, target=args.target)
    except ModelFileError as exc:
        _error(args, "unreadable", str(exc))
        return EXIT_UNREADABLE
    except (ValueError, BackendUnavailableError) as exc:
        _error(args, "usage", str(exc))
        return EXIT_UNREADABLE
    _print_report(report, args.json)
    checked = [b for b in report.backends if args.backend is None or b == args.backend]
    return EXIT_RUNS if all(report.runnable(b) for b in checked) else EXIT_DOES_NOT_RUN


def _run_engine_check(args, model) -> int:
    """Where each operator runs with ``backend="edgeinf"``; exit 0 whatever the verdict
    (what the engine lacks runs on LiteRT), 2 for an unreadable or non-.tflite model."""
    from ..engine.check import check_engine
    from ..errors import ModelFileError
    from ..formats.tflite import read_tflite

    if args.target is not None:
        _error(args, "usage", "--target names a LiteRT or NCNN runtime; the int8 engine is edgeinf's own")
        return EXIT_UNREADABLE
    try:
        with open(model, "rb") as f:
            head = f.read(8)
        if head[4:8] != b"TFL3":
            raise ModelFileError(f"{model}: the int8 engine runs .tflite models (no TFL3 identifier)")
        report = check_engine(read_tflite(model), str(model))
    except (OSError, ModelFileError) as exc:
        _error(args, "unreadable", str(exc))
        return EXIT_UNREADABLE
    _print_report(report, args.json)
    return EXIT_RUNS


def _print_report(report, as_json: bool) -> None:
    try:
        print(report.to_json() if as_json else report.to_text())
        sys.stdout.flush()
    except BrokenPipeError:  # `edgeinf check m.tflite | head`: the reader left, the verdict still counts
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _error(args, kind: str, message: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps({"schema": "edgeinf.compat/1", "error": {"kind": kind, "message": message}}, indent=2))
    print(f"edgeinf: error: {message}", file=sys.stderr)


def main(argv=None) -> int:
    """Run `edgeinf check` on its own (``python -m edgeinf.compat.cli MODEL``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="edgeinf")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["check", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
