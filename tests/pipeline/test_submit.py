"""Model.submit / submit_image futures and the asyncio wrappers, on the real face detector."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import edgeinf
from edgeinf.errors import InputError, ModelClosedError

WAIT_S = 60


@pytest.fixture(scope="module")
def detector(model_path):
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1) as model:
        yield model


def test_submitted_calls_return_what_run_returns(detector, rng):
    inputs = [rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32) for _ in range(3)]
    futures = [detector.submit(x) for x in inputs]
    for future, x in zip(futures, inputs):
        got, want = future.result(WAIT_S), detector.run(x)
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_submit_image_and_asyncio_match_run_image(detector):
    from clips import photo_rgb

    rgb = photo_rgb()
    options = {"letterbox": True, "mean": 127.5, "std": 127.5}
    want = detector.run_image(rgb, "rgb", **options)

    async def both():
        return await asyncio.gather(detector.arun_image(rgb, "rgb", **options), detector.arun(want_input))

    want_input = np.zeros((1, 128, 128, 3), np.float32)
    from_future = detector.submit_image(rgb, "rgb", **options).result(WAIT_S)
    from_async, zeros = asyncio.run(both())
    for name in want:
        np.testing.assert_array_equal(from_future[name], want[name], err_msg=name)
        np.testing.assert_array_equal(from_async[name], want[name], err_msg=name)
    assert zeros.keys() == want.keys()


def test_errors_arrive_through_the_future(detector):
    future = detector.submit(np.zeros((1, 64, 64, 3), np.float32))
    with pytest.raises(InputError, match="expects shape"):
        future.result(WAIT_S)


def test_submit_after_close_raises(model_path):
    model = edgeinf.load(model_path("face_detection_short_range"), num_threads=1)
    model.submit(np.zeros((1, 128, 128, 3), np.float32)).result(WAIT_S)
    model.close()
    with pytest.raises(ModelClosedError):
        model.submit(np.zeros((1, 128, 128, 3), np.float32))
