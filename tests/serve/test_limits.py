"""Auth, limits, deadlines and A/B routing of `edgeinf serve`, through a real HTTP client."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from serve_helpers import WAIT_S, Gate, ThreadServer, face_config, gated_loader, wait_until  # noqa: E402

from edgeinf import InputError  # noqa: E402
from edgeinf.serve import build_app, load_config  # noqa: E402

KEY = "predict-key-0123456789"
ADMIN_KEY = "admin-key-0123456789ab"


def body(face_input) -> dict:
    return {"inputs": {"shape": [1, 128, 128, 3], "dtype": "float32", "b64": base64.b64encode(face_input).decode()}}


def test_keys_401_without_or_with_a_wrong_key_403_for_reload_without_admin(face_input, tmp_path):
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# admins\n{ADMIN_KEY}\n")
    config = face_config(auth={"keys": [KEY], "admin_keys_file": str(keys_file)})
    with ThreadServer(config) as server:
        predict = f"{server.url}/v1/models/face:predict"
        missing = httpx.post(predict, json=body(face_input))
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        wrong = httpx.post(predict, json=body(face_input), headers={"Authorization": "Bearer " + KEY[:-1] + "x"})
        assert wrong.status_code == 401 and "unknown API key" in wrong.json()["error"]
        assert httpx.get(f"{server.url}/v1/models").status_code == 401
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        assert httpx.get(f"{server.url}/healthz").status_code == 200  # probes need no key
        ok = httpx.post(predict, json=body(face_input), headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
        assert httpx.post(predict, json=body(face_input), headers={"X-API-Key": ADMIN_KEY}).status_code == 200
        reload = f"{server.url}/v1/models/face:reload"
        refused = httpx.post(reload, headers={"X-API-Key": KEY}, timeout=WAIT_S)
        assert refused.status_code == 403 and "admin" in refused.json()["error"]
        assert httpx.post(reload, headers={"X-API-Key": ADMIN_KEY}, timeout=WAIT_S).status_code == 200


def test_without_keys_only_loopback_listens_and_answers(face_input):
    with pytest.raises(InputError, match="without API keys"):
        load_config(face_config(server={"host": "0.0.0.0"}))
    assert load_config(face_config(server={"host": "0.0.0.0"}, auth={"keys": [KEY]})).host == "0.0.0.0"

    async def from_elsewhere():
        # A client address no socket here can have: through the ASGI interface directly.
        app = build_app(face_config())
        transport = httpx.ASGITransport(app=app, client=("192.0.2.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            return await client.post("/v1/models/face:predict", json=body(face_input))

    response = asyncio.run(from_elsewhere())
    assert response.status_code == 403 and "local clients only" in response.json()["error"]


def test_body_over_the_limit_is_413(face_input):
    with ThreadServer(face_config(limits={"max_body_bytes": 100_000})) as server:
        predict = f"{server.url}/v1/models/face:predict"
        big = httpx.post(predict, json=body(face_input))  # 196 kB of base64
        assert big.status_code == 413 and "100000" in big.json()["error"]

        def chunks():  # no Content-Length: counted while it streams in
            for _ in range(20):
                yield b"x" * 10_000

        streamed = httpx.post(predict, content=chunks(), headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413


def test_rate_limit_is_429_with_retry_after_per_key(face_input):
    config = face_config(auth={"keys": [KEY, KEY + "-two"]}, limits={"rate_per_s": 0.01, "burst": 2})
    with ThreadServer(config) as server:
        predict = f"{server.url}/v1/models/face:predict"
        codes = [httpx.post(predict, json=body(face_input), headers={"X-API-Key": KEY}).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        limited = httpx.post(predict, json=body(face_input), headers={"X-API-Key": KEY})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        other = httpx.post(predict, json=body(face_input), headers={"X-API-Key": KEY + "-two"})
        assert other.status_code == 200  # each key has its own bucket


def test_full_queue_is_503_and_a_hung_model_is_504_and_replaced(face_input):
    gate = Gate()
    config = face_config(model={"deadline_s": 2.0}, limits={"queue": 1})
    with ThreadServer(config, loader=gated_loader(gate)) as server:
        predict = f"{server.url}/v1/models/face:predict"
        gate.hang_next()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            hung = pool.submit(httpx.post, predict, json=body(face_input), timeout=WAIT_S)
            assert gate.entered.acquire(timeout=WAIT_S)  # the model is stuck in that call
            busy = httpx.post(predict, json=body(face_input), timeout=WAIT_S)
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
            timed_out = hung.result()
        assert timed_out.status_code == 504 and "did not answer within 2.000 s" in timed_out.json()["error"]
        # The stuck call still holds its thread; a new worker loads its own model and answers.
        pool = server.service.models["face"].variants["default"].pool

        def replacement_ready():
            try:
                return pool.any_model() is not None
            except RuntimeError:  # still loading
                return False

        wait_until(replacement_ready, "the new worker's model")
        answered = httpx.post(predict, json=body(face_input), timeout=WAIT_S)
        assert answered.status_code == 200, answered.text
        text = httpx.get(f"{server.url}/metrics").text
        assert 'edgeinf_serve_workers_replaced_total{model="face",variant="default"' in text
        assert [line for line in text.splitlines() if line.startswith("edgeinf_serve_workers_replaced_total")][
            0
        ].endswith(" 1")
        gate.release()
        wait_until(lambda: pool.live_workers == 1, "one worker")


def two_variants(weights=(3.0, 1.0), compare=0.0) -> dict:
    return face_config(
        model={
            "path": "face_detection_short_range",
            "weight": weights[0],
            "variants": {"canary": {"path": "face_detection_short_range", "weight": weights[1], "compare": compare}},
        }
    )


def test_variant_header_routes_and_the_split_follows_the_weights(face_input):
    with ThreadServer(two_variants(), seed=7) as server:
        predict = f"{server.url}/v1/models/face:predict"
        with httpx.Client() as client:
            for variant in ("canary", "default", "canary"):
                response = client.post(predict, json=body(face_input), headers={"X-Model-Variant": variant})
                assert response.status_code == 200 and response.headers["x-model-variant"] == variant
            small = {"inputs": {"shape": [1, 1, 1, 3], "dtype": "float32", "data": [[[[0, 0, 0]]]]}}
            # A wrong-shape request is routed (and refused by the model) just like a good one: cheap to send.
            seen = [client.post(predict, json=small).headers["x-model-variant"] for _ in range(400)]
    share = seen.count("canary") / len(seen)
    assert 0.15 < share < 0.35, share  # weight 1 of 4: 0.25, +-0.1 is over four standard deviations


def test_compared_variant_exports_drift_per_variant(face_input):
    with ThreadServer(two_variants(weights=(1.0, 0.0), compare=1.0)) as server:
        predict = f"{server.url}/v1/models/face:predict"
        for _ in range(5):
            assert httpx.post(predict, json=body(face_input)).headers["x-model-variant"] == "default"
        ab = server.service.models["face"].ab
        wait_until(lambda: ab.report().compared >= 1, "a compared call")
        compared = ab.report().compared
        # A reload of both variants keeps the one A/B test: its figures go on, never twice in /metrics.
        assert httpx.post(f"{server.url}/v1/models/face:reload", timeout=WAIT_S).status_code == 200
        for _ in range(5):
            assert httpx.post(predict, json=body(face_input)).status_code == 200
        wait_until(lambda: ab.report().compared > compared, "a compared call after the reload")
        assert server.service.models["face"].ab is ab
        text = httpx.get(f"{server.url}/metrics").text
    drift = [line for line in text.splitlines() if line.startswith('edgeinf_ab_drift{ab="face/canary"')]
    worst = [line for line in drift if 'figure="max_abs_error",stat="max"}' in line]
    assert worst == ['edgeinf_ab_drift{ab="face/canary",figure="max_abs_error",stat="max"} 0.0'], drift


def test_request_deadline_defaults_to_three_probe_medians_at_least_the_floor():
    config = face_config(limits={"deadline_factor": 1000.0, "min_deadline_s": 0.001})
    del config["models"]["face"]["deadline_s"]
    with ThreadServer(config) as server:
        variant = server.service.models["face"].variants["default"]
        assert variant.pool.deadline_s == pytest.approx(1000.0 * variant.probe_p50_s)
    config = face_config(limits={"min_deadline_s": 30.0})
    del config["models"]["face"]["deadline_s"]
    with ThreadServer(config) as server:
        assert server.service.models["face"].variants["default"].pool.deadline_s == 30.0


def test_the_default_deadline_holds_for_an_image_whose_answer_takes_real_time(photo_jpeg):
    # No floor: the deadline is 3 probe medians alone. The photo is a real 512x600 JPEG and the
    # detector's 15k outputs are answered as lists: decoding and encoding cost more than the model.
    config = face_config(limits={"min_deadline_s": 0.001})
    del config["models"]["face"]["deadline_s"]
    with ThreadServer(config) as server:
        predict = f"{server.url}/v1/models/face:predict"
        headers = {"Content-Type": "image/jpeg"}
        codes = [httpx.post(predict, content=photo_jpeg, headers=headers, timeout=WAIT_S).status_code for _ in range(3)]
    assert codes == [200, 200, 200]


def test_the_default_deadline_still_frees_the_worker_of_a_hung_model(face_input):
    gate = Gate()
    config = face_config(limits={"min_deadline_s": 0.5})
    del config["models"]["face"]["deadline_s"]
    with ThreadServer(config, loader=gated_loader(gate)) as server:
        pool = server.service.models["face"].variants["default"].pool
        predict = f"{server.url}/v1/models/face:predict"
        gate.hang_next()
        hung = httpx.post(predict, json=body(face_input), timeout=WAIT_S)
        assert hung.status_code == 504 and f"within {pool.deadline_s:.3f} s" in hung.json()["error"]
        assert pool.replaced == 1
        wait_until(
            lambda: pool.live_workers == 1 and httpx.post(predict, json=body(face_input)).status_code == 200,
            "an answer from the new worker",
        )
        gate.release()
