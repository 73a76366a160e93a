"""Model on TFLite gives exactly what the raw interpreter gives, and reports how it ran."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import edgeinf

litert = pytest.importorskip("ai_edge_litert.interpreter")


@pytest.fixture(scope="module")
def face_path(model_path):
    return model_path("face_detection_short_range")


@pytest.fixture(scope="module")
def face_model(face_path):
    with edgeinf.load(face_path, num_threads=1) as model:
        yield model


def raw_outputs(path, x, resolver=None):
    kwargs = {"experimental_op_resolver_type": resolver} if resolver is not None else {}
    interp = litert.Interpreter(model_path=str(path), num_threads=1, **kwargs)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return {d["name"]: interp.get_tensor(d["index"]) for d in interp.get_output_details()}


def test_specs_describe_the_face_model(face_model):
    (spec,) = face_model.inputs
    assert spec.name == "input"
    assert spec.shape == (1, 128, 128, 3)
    assert spec.dtype == np.float32
    assert spec.layout == edgeinf.Layout.NHWC
    assert spec.quantization is None
    assert {s.name: s.shape for s in face_model.outputs} == {"regressors": (1, 896, 16), "classificators": (1, 896, 1)}


def test_xnnpack_is_the_default_path_and_is_reported(face_model):
    assert face_model.backend == "tflite"
    assert face_model.runtime.startswith("ai_edge_litert ")
    assert face_model.delegate == "xnnpack"
    assert face_model.details["delegate_partitions"] == 1
    assert face_model.num_threads == 1


def test_run_equals_raw_interpreter_bit_for_bit(face_model, face_path, rng):
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    ours = face_model.run(x)
    theirs = raw_outputs(face_path, x)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_builtin_kernels_path_matches_raw_builtin_interpreter(face_path, rng):
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    with edgeinf.load(face_path, num_threads=1, xnnpack=False) as model:
        assert model.delegate is None
        ours = model.run(x)
    theirs = raw_outputs(face_path, x, litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_list_dict_and_single_array_inputs_agree(face_model, rng):
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    a = face_model.run(x)
    b = face_model.run([x])
    c = face_model.run({"input": x})
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        np.testing.assert_array_equal(a[name], c[name])


def test_input_buffer_is_the_interpreters_memory(face_model, rng):
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    expected = face_model.run(x)
    buffer = face_model.input_buffer("input")
    assert buffer.shape == (1, 128, 128, 3) and buffer.dtype == np.float32
    buffer[...] = x
    del buffer
    got = face_model.invoke()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_invoke_with_a_live_input_buffer_is_a_clear_error(face_model):
    buffer = face_model.input_buffer(0)
    with pytest.raises(edgeinf.RuntimeFailure, match="input_buffer"):
        face_model.invoke()
    del buffer


def test_thread_count_is_passed_to_the_runtime(face_path, rng):
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    with edgeinf.load(face_path, num_threads=2) as two, edgeinf.load(face_path, num_threads=1) as one:
        assert two.num_threads == 2
        a, b = two.run(x), one.run(x)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-4, atol=1e-4)


def test_shared_model_is_safe_from_several_threads(face_model, rng):
    frames = [rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32) for _ in range(4)]
    expected = [face_model.run(f)["classificators"] for f in frames]
    errors, results = [], {}

    def worker(k):
        try:
            for _ in range(5):
                results[k] = face_model.run(frames[k])["classificators"]
                np.testing.assert_array_equal(results[k], expected[k])
        except Exception as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_closed_model_refuses_to_run(face_path):
    model = edgeinf.load(face_path, num_threads=1)
    model.close()
    model.close()  # idempotent
    assert model.closed
    with pytest.raises(edgeinf.ModelClosedError):
        model.run(np.zeros((1, 128, 128, 3), np.float32))


def test_dequantize_turns_int8_outputs_into_floats():
    from edgeinf.types import Quantization, TensorSpec

    spec = TensorSpec("y", (1, 4), np.dtype(np.int8), quantization=Quantization((0.5,), (-3,)))
    q = np.array([[-128, -3, 0, 127]], np.int8)
    np.testing.assert_array_equal(spec.quantization.dequantize(q), [[-62.5, 0.0, 1.5, 65.0]])


def test_load_reads_and_verifies_the_model_once(face_path, monkeypatch):
    from edgeinf.compat import check as compat_check
    from edgeinf.formats import tflite

    calls = []
    real = tflite.read_tflite
    monkeypatch.setattr(tflite, "read_tflite", lambda src, **kw: calls.append(src) or real(src, **kw))
    with edgeinf.load(face_path, num_threads=1) as model:
        assert model.report is not None and model.report.runnable("tflite")
    assert len(calls) == 1
    # the report from the parsed model equals a check that reads the file itself
    assert model.report.to_json() == compat_check(face_path, backend="tflite").to_json()
