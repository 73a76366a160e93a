"""Inputs the fuzzers (tools/fuzz/fuzz_*.py) found, replayed the way the fuzzers run them.

Each file in fuzz_findings/ once made a reader or the checker raise something other than
edgeinf's documented errors. The replay reads it, then checks it from a file; only a
`ModelFileError` or `UnsupportedOperatorError` may come out, or nothing. A .param/.bin
pair is stored as one blob: a 4-byte little-endian .param length, the .param, then a
zero byte and the .bin when there is one (tools/fuzz/fuzz_ncnn.py).
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest

import edgeinf
from edgeinf.errors import ModelFileError, UnsupportedOperatorError
from edgeinf.formats.ncnn_param import read_ncnn_param
from edgeinf.formats.onnx import read_onnx
from edgeinf.formats.tflite import read_tflite

FINDINGS = Path(__file__).parent / "fuzz_findings"

# what each finding must now give (None: it reads and checks cleanly)
EXPECTED = {
    "tflite-negative-dimension.tflite": r"shape \[2, 32, 4, -12, .*\] has a negative dimension",
    "onnx-name-not-utf8.onnx": r"fails onnx's model checker",
    "onnx-unknown-element-type.onnx": None,
    "onnx-op-type-not-utf8.onnx": None,
}


def _replay(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    if path.suffix == ".tflite":
        read_tflite(data, name=path.name)
        (tmp_path / path.name).write_bytes(data)
        edgeinf.check(tmp_path / path.name).to_json()
    elif path.suffix == ".onnx":
        read_onnx(data, name=path.name)
        (tmp_path / path.name).write_bytes(data)
        edgeinf.check(tmp_path / path.name).to_json()
    else:
        n = struct.unpack_from("<I", data)[0]
        param, rest = data[4 : 4 + n], data[4 + n :]
        (tmp_path / "m.param").write_bytes(param)
        if rest:
            (tmp_path / "m.bin").write_bytes(rest[1:])
        read_ncnn_param(tmp_path / "m.param")
        edgeinf.check(tmp_path / "m.param").to_json()


@pytest.mark.parametrize("name", sorted(p.name for p in FINDINGS.iterdir()))
def test_fuzz_finding_gives_a_documented_error_or_none(tmp_path, name):
    pytest.importorskip("onnx")
    expected = EXPECTED.get(name)
    if expected is None:
        with contextlib.suppress(ModelFileError, UnsupportedOperatorError):
            _replay(FINDINGS / name, tmp_path)
    else:
        with pytest.raises(ModelFileError, match=expected):
            _replay(FINDINGS / name, tmp_path)


def test_every_finding_has_an_expectation():
    assert sorted(EXPECTED) == sorted(p.name for p in FINDINGS.iterdir())
