"""Fuzz the NCNN .param/.bin reader and the compatibility checker (atheris, coverage-guided).

An input is a .param and its .bin in one blob: a 4-byte little-endian length, that many
bytes of .param, then the .bin (see `split`, and `join` to make seeds). Both are written
to files, read (`read_ncnn_param`) and checked (`edgeinf.check`). Every exception other
than edgeinf's documented errors, MemoryError and RecursionError included, is a finding.

    python tools/fuzz/fuzz_ncnn.py CORPUS_DIR tools/fuzz/corpus/ncnn -max_total_time=60
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import atheris
from model_file import DOCUMENTED, INSTRUMENTED, check_file, fuzz

with atheris.instrument_imports(include=INSTRUMENTED):
    from edgeinf.formats.ncnn_param import read_ncnn_param

_DIR = Path(tempfile.mkdtemp(prefix="edgeinf-fuzz-ncnn-"))
_PARAM, _BIN = _DIR / "input.param", _DIR / "input.bin"


def join(param: bytes, weights: bytes | None) -> bytes:
    """One fuzz input from a .param and its .bin (None: no .bin file)."""
    return struct.pack("<I", len(param)) + param + (b"" if weights is None else b"\0" + weights)


def split(data: bytes) -> tuple[bytes, bytes | None]:
    if len(data) < 4:
        return data, None
    n = struct.unpack_from("<I", data)[0]
    param, rest = data[4 : 4 + n], data[4 + n :]
    return param, (rest[1:] if rest else None)


def test_one_input(data: bytes) -> None:
    param, weights = split(data)
    _PARAM.write_bytes(param)
    if weights is None:
        _BIN.unlink(missing_ok=True)
    else:
        _BIN.write_bytes(weights)
    try:
        read_ncnn_param(_PARAM)
    except DOCUMENTED:
        return
    check_file(_PARAM)


if __name__ == "__main__":
    fuzz(test_one_input)
