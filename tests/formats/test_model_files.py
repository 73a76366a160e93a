"""The three model readers answer a missing file or a directory with the same clear error."""

from __future__ import annotations

import pytest

from edgeinf.errors import ModelFileError
from edgeinf.formats.ncnn_param import read_ncnn_param
from edgeinf.formats.onnx import read_onnx
from edgeinf.formats.tflite import read_tflite

READERS = [
    pytest.param(read_tflite, "a .tflite file", id="tflite"),
    pytest.param(read_ncnn_param, "an NCNN .param file", id="ncnn"),
    pytest.param(read_onnx, "an .onnx file", id="onnx"),
]


@pytest.mark.parametrize(("read", "expected"), READERS)
def test_a_directory_names_the_file_kind_expected(tmp_path, read, expected):
    with pytest.raises(ModelFileError, match=f"is a directory, expected {expected}"):
        read(tmp_path)


@pytest.mark.parametrize(("read", "expected"), READERS)
def test_a_missing_file_is_named(tmp_path, read, expected):
    missing = tmp_path / "absent.model"
    with pytest.raises(ModelFileError, match="absent.model: no such file"):
        read(missing)
