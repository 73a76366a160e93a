"""Every endpoint of `edgeinf serve` through a real HTTP client, with the real face model and photo."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from serve_helpers import FACE_IMAGE, ThreadServer, face_config  # noqa: E402

from edgeinf import zoo  # noqa: E402
from edgeinf.serve.codecs import decode_tensor  # noqa: E402


@pytest.fixture(scope="module")
def server():
    with ThreadServer(face_config()) as running:
        yield running


def tensor_b64(array: np.ndarray) -> dict:
    return {"shape": list(array.shape), "dtype": array.dtype.name, "b64": base64.b64encode(array.tobytes()).decode()}


def outputs_of(response) -> dict:
    assert response.status_code == 200, response.text
    return {name: decode_tensor(t, name, [1 << 30]) for name, t in response.json()["outputs"].items()}


def assert_same_outputs(got: dict, expected: dict, atol: float = 0.0) -> None:
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, atol=atol, rtol=0, err_msg=name)


def test_health_and_ready(server):
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    ready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 200, ready.text


def test_models_lists_specs_variants_and_sha256(server):
    response = httpx.get(f"{server.url}/v1/models")
    assert response.status_code == 200
    (model,) = response.json()["models"]
    assert model["name"] == "face" and model["primary"] == "default"
    variant = model["variants"]["default"]
    assert variant["sha256"] == zoo.sha256_of(zoo.path("face_detection_short_range"))
    assert variant["inputs"] == [{"name": "input", "shape": [1, 128, 128, 3], "dtype": "float32", "layout": "NHWC"}]
    assert sorted(o["name"] for o in variant["outputs"]) == ["classificators", "regressors"]
    assert variant["deadline_s"] >= variant["probe_p50_s"] > 0


@pytest.mark.parametrize("form", ["b64", "list", "list-of-tensors", "by-name"])
def test_predict_json_tensor_forms_match_the_model(server, face_model, face_input, form):
    if form == "b64":
        inputs = tensor_b64(face_input)
    else:
        tensor = {"shape": list(face_input.shape), "dtype": "float32", "data": face_input.tolist()}
        inputs = {"list": tensor, "list-of-tensors": [tensor], "by-name": {"input": tensor}}[form]
    response = httpx.post(f"{server.url}/v1/models/face:predict", json={"inputs": inputs, "encoding": "b64"})
    assert response.headers["x-model-variant"] == "default"
    assert_same_outputs(outputs_of(response), face_model.run(face_input))


def test_predict_list_encoding_round_trips_float32(server, face_model, face_input):
    response = httpx.post(f"{server.url}/v1/models/face:predict", json={"inputs": tensor_b64(face_input)})
    assert "data" in response.json()["outputs"]["regressors"]
    assert_same_outputs(outputs_of(response), face_model.run(face_input))


def test_predict_jpeg_and_png_images_match_run_image(server, face_model, photo_jpeg, photo_rgb):
    from PIL import Image

    expected = face_model.run_image(photo_rgb, color="rgb", **FACE_IMAGE)
    jpeg = httpx.post(
        f"{server.url}/v1/models/face:predict", content=photo_jpeg, headers={"Content-Type": "image/jpeg"}
    )
    assert_same_outputs(outputs_of(jpeg), expected)
    assert jpeg.json()["letterbox"]["out_w"] == 128
    png_bytes = io.BytesIO()
    Image.fromarray(photo_rgb).save(png_bytes, format="PNG")
    png = httpx.post(
        f"{server.url}/v1/models/face:predict", content=png_bytes.getvalue(), headers={"Content-Type": "image/png"}
    )
    assert_same_outputs(outputs_of(png), expected)
    compact = httpx.post(
        f"{server.url}/v1/models/face:predict?encoding=b64", content=photo_jpeg, headers={"Content-Type": "image/jpeg"}
    )
    assert "b64" in compact.json()["outputs"]["regressors"]
    assert_same_outputs(outputs_of(compact), expected)


def test_predict_nv12_frame_matches_run_image(server, face_model, photo_rgb):
    cv2 = pytest.importorskip("cv2")
    height, width = 600, 512
    i420 = cv2.cvtColor(np.ascontiguousarray(photo_rgb[:height, :width]), cv2.COLOR_RGB2YUV_I420)
    y, u, v = i420[:height], i420[height : height + height // 4], i420[height + height // 4 :]
    uv = np.stack([u.reshape(-1), v.reshape(-1)], axis=1).reshape(height // 2, width)
    nv12 = np.ascontiguousarray(np.concatenate([y, uv]))
    expected = face_model.run_image(nv12, color="nv12", **FACE_IMAGE)
    response = httpx.post(
        f"{server.url}/v1/models/face:predict?width={width}&height={height}",
        content=nv12.tobytes(),
        headers={"Content-Type": "application/x-nv12"},
    )
    assert_same_outputs(outputs_of(response), expected)


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        (b"{not json", {"Content-Type": "application/json"}, "not JSON"),
        (json.dumps({"x": 1}).encode(), {}, '"inputs"'),
        (json.dumps({"inputs": {"shape": [2], "dtype": "complex64", "data": [1, 2]}}).encode(), {}, "dtype"),
        (json.dumps({"inputs": {"shape": [3], "dtype": "float32", "b64": "AAAA"}}).encode(), {}, "needs 12"),
        (json.dumps({"inputs": {"shape": [3], "dtype": "float32", "b64": "@@@@"}}).encode(), {}, "base64"),
        (json.dumps({"inputs": {"shape": [2], "dtype": "float32", "data": [1, 2, 3]}}).encode(), {}, "shape"),
        (json.dumps({"inputs": {"shape": [1 << 40], "dtype": "uint8", "b64": ""}}).encode(), {}, "elements"),
        (b"\xff\xd8\xff\xe0 truncated", {"Content-Type": "image/jpeg"}, "JPEG"),
        (b"\x00" * 10, {"Content-Type": "application/x-nv12"}, "width and height"),
    ],
)
def test_malformed_requests_are_400_with_the_reason(server, body, headers, message):
    response = httpx.post(f"{server.url}/v1/models/face:predict", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]


def test_input_the_model_refuses_is_422_with_its_message(server, face_input):
    wrong = np.ascontiguousarray(face_input[:, :64])
    response = httpx.post(f"{server.url}/v1/models/face:predict", json={"inputs": tensor_b64(wrong)})
    assert response.status_code == 422
    assert "expects shape [1, 128, 128, 3], got [1, 64, 128, 3]" in response.json()["error"]
    as_int = {"shape": [1, 128, 128, 3], "dtype": "int32", "b64": tensor_b64(face_input.astype(np.int32))["b64"]}
    response = httpx.post(f"{server.url}/v1/models/face:predict", json={"inputs": as_int})
    assert response.status_code == 422 and "float32" in response.json()["error"]


def test_unknown_model_variant_and_action_are_404(server, face_input):
    body = {"inputs": tensor_b64(face_input)}
    response = httpx.post(f"{server.url}/v1/models/nose:predict", json=body)
    assert response.status_code == 404 and "'face'" in response.json()["error"]
    response = httpx.post(f"{server.url}/v1/models/face:predict", json=body, headers={"X-Model-Variant": "int8"})
    assert response.status_code == 404 and "'default'" in response.json()["error"]
    assert httpx.post(f"{server.url}/v1/models/face:explain", json=body).status_code == 404


def test_metrics_count_requests_by_code_with_model_metrics(server, face_input):
    httpx.post(f"{server.url}/v1/models/face:predict", json={"inputs": tensor_b64(face_input)})
    httpx.post(f"{server.url}/v1/models/face:predict", content=b"{", headers={"Content-Type": "application/json"})
    response = httpx.get(f"{server.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert 'edgeinf_serve_requests_total{route="predict",model="face",variant="default",code="200"}' in text
    assert 'edgeinf_serve_requests_total{route="predict",model="face",variant="default",code="400"}' in text
    assert 'edgeinf_serve_request_latency_seconds_bucket{model="face",variant="default",le="+Inf"}' in text
    assert "edgeinf_model_calls_total{" in text and 'model="face_detection_short_range.tflite"' in text
    prometheus = pytest.importorskip("prometheus_client.parser")
    families = {f.name: f for f in prometheus.text_string_to_metric_families(text)}
    assert "edgeinf_serve_request_latency_seconds" in families
    assert families["edgeinf_serve_requests"].type == "counter"


def test_cli_refuses_a_bad_config_or_a_public_address_without_keys(tmp_path):
    import subprocess
    import sys

    from serve_helpers import REPO, free_port

    bad = tmp_path / "bad.toml"
    bad.write_text('[limits]\nqeue = 3\n[models.face]\npath = "face_detection_short_range"\n')
    corrupt = tmp_path / "corrupt.toml"
    (tmp_path / "corrupt.tflite").write_bytes(b"TFL3" + bytes(1000))
    corrupt.write_text(f'[server]\nport = {free_port()}\n[models.face]\npath = "{tmp_path / "corrupt.tflite"}"\n')
    good = tmp_path / "good.toml"
    good.write_text('[models.face]\npath = "face_detection_short_range"\n')
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    for config, extra, message in (
        (bad, [], "unknown key(s) ['qeue']"),
        (good, ["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0 without API keys"),
        (good, ["--port", "70000"], "--port must be from 0 to 65535"),
        (corrupt, [], "corrupt.tflite"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "edgeinf", "serve", "--config", str(config), *extra],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]  # after uvicorn's log, if it started
        assert last.startswith("edgeinf: error:") and message in last, done.stderr
