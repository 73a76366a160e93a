"""The answer encoder: the same JSON document as `json.dumps` of the outputs, faster."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeinf.serve.codecs import encode_answer, encode_outputs


def outputs() -> dict:
    rng = np.random.default_rng(7)
    return {
        "boxes": (rng.standard_normal((1, 896, 16)) * 100).astype(np.float32),
        "scores": rng.standard_normal((1, 896, 1)).astype(np.float32),
        "rows": rng.standard_normal((3, 1000)).astype(np.float32),  # pieces of the format: 1024, 1024, 952
        "edges": np.array([0.0, -0.0, 1e-45, 3.4028235e38, -1.1754944e-38, 0.1], np.float32),
        "wide": rng.standard_normal((3, 2)),
        "scalar": np.float64(3.25),
        "empty": np.zeros((0, 4), np.float32),
        "counts": np.array([[1, -2], [127, -128]], np.int8),
        "flags": np.array([True, False]),
        "half": np.array([0.1, 65504.0], np.float16),
        "nan": np.array([np.nan, np.inf, 1.5], np.float32),
    }


@pytest.mark.parametrize("encoding", ["list", "b64"])
def test_encode_answer_is_the_json_of_encode_outputs(encoding):
    extra = {"letterbox": {"scale": 0.25, "pad_x": 3}}
    fast = json.loads(encode_answer(outputs(), encoding, extra))
    reference = json.loads(json.dumps({"outputs": encode_outputs(outputs(), encoding), **extra}))
    assert fast.keys() == reference.keys() and fast["letterbox"] == reference["letterbox"]
    assert list(fast["outputs"]) == list(reference["outputs"])
    for name, array in outputs().items():
        got, want = fast["outputs"][name], reference["outputs"][name]
        assert (got["shape"], got["dtype"]) == (want["shape"], want["dtype"]), name
        if encoding == "b64":
            assert got == want, name
            continue
        parsed = np.array(got["data"], dtype=np.asarray(array).dtype).reshape(got["shape"])
        assert np.array_equal(parsed, array, equal_nan=True), f"{name}: {parsed} != {array}"
        assert np.array_equal(np.signbit(parsed), np.signbit(array)), name  # -0.0 stays negative
