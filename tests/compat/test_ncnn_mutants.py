"""An NCNN .param edited so that its .bin is read out of step crashes ncnn at run time;
edgeinf refuses it before ncnn sees it (the runtime runs in a child process)."""

from __future__ import annotations

import shutil

import pytest

import edgeinf
from edgeinf.errors import ModelFileError

pytestmark = pytest.mark.slow


def test_int8_scale_flag_crashes_ncnn_and_is_refused(model_path, tmp_path, ncnn_worker):
    src = model_path("realesr_animevideov3_x2")
    param, weights = tmp_path / "m.param", tmp_path / "m.bin"
    shutil.copy(src.with_suffix(".bin"), weights)
    lines = src.read_text().splitlines()
    first_conv = next(i for i, line in enumerate(lines) if line.startswith("Convolution"))
    job = {"kind": "ncnn", "path": str(param), "bin": str(weights), "inputs": {"data": [3, 32, 32]}}

    param.write_text("\n".join(lines) + "\n")
    assert ncnn_worker.ask(job)["ok"]
    lines[first_conv] += " 8=101"  # int8 scale terms: ncnn reads scales the .bin does not hold
    param.write_text("\n".join(lines) + "\n")
    reply = ncnn_worker.ask(job)
    assert not reply["ok"], reply  # a segfault with ncnn 1.0.20261020
    with pytest.raises(ModelFileError, match=r"m\.bin is \d+ bytes but the params imply \d+"):
        edgeinf.check(param)
