"""Fuzz the .tflite reader and the compatibility checker (atheris, coverage-guided).

Each input is a whole .tflite file. It is read and verified (`read_tflite`), and what
reads is then checked (`edgeinf.check`) from a file, as `edgeinf check` would. Every
exception other than edgeinf's documented errors, MemoryError and RecursionError
included, is a finding: atheris stops, saves the input and exits nonzero.

    python tools/fuzz/fuzz_tflite.py CORPUS_DIR tools/fuzz/corpus/tflite -max_total_time=60
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import atheris
from model_file import INSTRUMENTED, fuzz, read_then_check

with atheris.instrument_imports(include=INSTRUMENTED):
    from edgeinf.formats.tflite import read_tflite

_FILE = Path(tempfile.mkdtemp(prefix="edgeinf-fuzz-tflite-")) / "input.tflite"
_TARGETS = ("ai-edge-litert 2.3.0", "tflite-runtime 2.14.0")


def test_one_input(data: bytes) -> None:
    read_then_check(data, partial(read_tflite, name="input.tflite"), _FILE, _TARGETS)


if __name__ == "__main__":
    fuzz(test_one_input)
