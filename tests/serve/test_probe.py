"""The load probe times whole requests: body decoding, the model, answer encoding."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from edgeinf.serve import registry


class Recorder:
    """A model stand-in that keeps what each call received."""

    def __init__(self, dtype=np.float32):
        self.inputs = [SimpleNamespace(name="x", shape=(1, 4, 4, 3), dtype=dtype)]
        self.runs, self.frames = [], []

    def run(self, inputs, **options):
        self.runs.append(inputs)
        return {"y": np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)}

    def run_image(self, frame, color, **options):
        self.frames.append(frame)
        return {"y": np.zeros((1, 32), np.float32)}


def test_the_probe_decodes_a_json_body_and_a_jpeg_before_each_call():
    model = Recorder()
    assert registry.probe(model, {"mean": 127.5, "std": 127.5}) > 0
    assert len(model.runs) == len(model.frames) == 1 + registry.PROBE_RUNS
    (tensor,) = model.runs[0]  # parsed from the body: seeded values, not the zeros of probe_input
    assert tensor.shape == (1, 4, 4, 3) and tensor.dtype == np.float32 and np.abs(tensor).max() > 0
    frame, original = model.frames[0], registry._probe_frame()
    assert frame.shape == original.shape == (480, 640, 3)
    difference = np.abs(frame.astype(int) - original)
    assert 0 < difference.mean() < 20  # decoded from a JPEG (noise is what it loses most): near the frame


def test_an_input_json_cannot_carry_is_probed_on_the_model_alone():
    model = Recorder(dtype=np.complex64)
    assert registry.probe(model, {}) > 0
    assert model.runs[0][0].dtype == np.complex64
