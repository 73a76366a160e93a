"""Fuzz the .onnx reader and the compatibility checker (atheris, coverage-guided).

Each input is a whole .onnx file: read (`read_onnx`), then checked (`edgeinf.check`)
from a file. The onnx package's protobuf parser is native and not instrumented; the
coverage guides edgeinf's side. Every exception other than edgeinf's documented
errors, MemoryError and RecursionError included, is a finding.

    python tools/fuzz/fuzz_onnx.py CORPUS_DIR tools/fuzz/corpus/onnx -max_total_time=60
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import atheris
from model_file import INSTRUMENTED, fuzz, read_then_check

with atheris.instrument_imports(include=INSTRUMENTED):
    from edgeinf.formats.onnx import read_onnx

_FILE = Path(tempfile.mkdtemp(prefix="edgeinf-fuzz-onnx-")) / "input.onnx"


def test_one_input(data: bytes) -> None:
    read_then_check(data, partial(read_onnx, name="input.onnx"), _FILE)


if __name__ == "__main__":
    fuzz(test_one_input)
