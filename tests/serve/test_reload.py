"""Model updates without downtime: reload while serving, refused files, rollback, SIGHUP."""

from __future__ import annotations

import base64
import shutil
import signal
import threading

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from serve_helpers import (  # noqa: E402
    WAIT_S,
    ThreadServer,
    face_config,
    failing_when,
    free_port,
    start_process,
    wait_ready,
    wait_until,
)

from edgeinf import zoo  # noqa: E402


def body(face_input) -> dict:
    return {"inputs": {"shape": [1, 128, 128, 3], "dtype": "float32", "b64": base64.b64encode(face_input).decode()}}


class Traffic:
    """Threads sending predictions until stopped; every status code is kept."""

    def __init__(self, url: str, face_input, threads: int = 3):
        self.url, self.body = f"{url}/v1/models/face:predict", body(face_input)
        self.codes: list[int] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._send, daemon=True) for _ in range(threads)]

    def _send(self):
        with httpx.Client(timeout=WAIT_S) as client:
            while not self.stop.is_set():
                self.codes.append(client.post(self.url, json=self.body).status_code)

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        wait_until(lambda: len(self.codes) >= 3, "the first answers")
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(WAIT_S)


def variant_info(url: str) -> dict:
    return httpx.get(f"{url}/v1/models").json()["models"][0]


def test_good_reloads_under_load_fail_no_request(face_input, tmp_path):
    original = zoo.path("face_detection_short_range")
    copy = tmp_path / "face_v2.tflite"
    shutil.copyfile(original, copy)
    sha = zoo.sha256_of(copy)
    with ThreadServer(face_config()) as server, Traffic(server.url, face_input) as traffic:
        reload = f"{server.url}/v1/models/face:reload"
        for _ in range(2):
            before = len(traffic.codes)
            assert httpx.post(reload, timeout=WAIT_S).status_code == 200
            wait_until(lambda before=before: len(traffic.codes) > before + 3, "answers after the swap")
        pushed = httpx.post(reload, json={"path": str(copy), "sha256": sha}, timeout=WAIT_S)
        assert pushed.status_code == 200, pushed.text
        before = len(traffic.codes)
        wait_until(lambda: len(traffic.codes) > before + 3, "answers from the new file")
        info = variant_info(server.url)
    assert set(traffic.codes) == {200}, sorted(set(traffic.codes))
    assert info["reloads"] == 3 and info["variants"]["default"]["path"] == str(copy)


def test_corrupt_or_mismatched_model_is_refused_and_the_old_one_serves(face_input, tmp_path):
    original = zoo.path("face_detection_short_range")
    data = original.read_bytes()
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"TFL3" + bytes(range(256)) * 40)
    copy = tmp_path / "copy.tflite"
    shutil.copyfile(original, copy)
    with ThreadServer(face_config()) as server, Traffic(server.url, face_input) as traffic:
        reload = f"{server.url}/v1/models/face:reload"
        for path, sha, reason in (
            (truncated, None, "truncated.tflite"),
            (garbage, None, "garbage.tflite"),
            (copy, "0" * 64, "sha256"),
            (tmp_path / "missing.tflite", None, "no model file"),
        ):
            request = {"path": str(path)} | ({"sha256": sha} if sha else {})
            refused = httpx.post(reload, json=request, timeout=WAIT_S)
            assert refused.status_code == 422, refused.text
            assert "keeps serving" in refused.json()["error"] and reason in refused.json()["error"]
        before = len(traffic.codes)
        wait_until(lambda: len(traffic.codes) > before + 3, "answers after the refusals")
        info = variant_info(server.url)
        metrics = httpx.get(f"{server.url}/metrics").text
    assert set(traffic.codes) == {200}
    assert info["reloads"] == 0 and info["variants"]["default"]["sha256"] == zoo.sha256_of(original)
    assert 'edgeinf_serve_reloads_total{model="face",outcome="refused"} 4' in metrics


def test_error_spike_after_a_reload_rolls_back(face_input, tmp_path):
    flaky = tmp_path / "flaky.tflite"
    shutil.copyfile(zoo.path("face_detection_short_range"), flaky)
    config = face_config(rollback={"min_requests": 4, "error_rate": 0.5, "window_s": 600.0})
    armed = threading.Event()
    loader = failing_when(armed, marker="flaky")  # passes the load probe, then fails once armed
    with ThreadServer(config, loader=loader) as server, httpx.Client(timeout=WAIT_S) as client:
        predict, reload = f"{server.url}/v1/models/face:predict", f"{server.url}/v1/models/face:reload"
        assert client.post(reload, json={"path": str(flaky)}).status_code == 200
        flaky_pool = server.service.models["face"].variants["default"].pool
        assert client.post(predict, json=body(face_input)).status_code == 200
        armed.set()
        codes = [client.post(predict, json=body(face_input)).status_code for _ in range(8)]
        info = variant_info(server.url)
        wait_until(lambda: flaky_pool.live_workers == 0, "the rolled-back model to close")
    # 1 good + 3 failed answers: not yet over half of the minimum 4; the 4th failure rolls back.
    assert codes[:3] == [500] * 3 and set(codes[3:]) <= {500, 200} and codes[-1] == 200, codes
    assert codes.count(500) == 3, codes
    assert info["rollbacks"] == 1 and info["variants"]["default"]["path"] != str(flaky)


def test_sighup_reloads_from_the_edited_config_file(tmp_path):
    copy = tmp_path / "face_v2.tflite"
    shutil.copyfile(zoo.path("face_detection_short_range"), copy)
    port = free_port()
    config = tmp_path / "edgeinf.toml"
    template = '[server]\nport = {port}\n[models.face]\npath = "{path}"\ndeadline_s = 60.0\n'
    config.write_text(template.format(port=port, path="face_detection_short_range"))
    process = start_process(["-m", "edgeinf", "serve", "--config", str(config)])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        config.write_text(template.format(port=port, path=copy))
        process.send_signal(signal.SIGHUP)
        wait_until(lambda: variant_info(url)["variants"]["default"]["path"] == str(copy), "the SIGHUP reload")
        assert variant_info(url)["reloads"] == 1
    finally:
        process.terminate()
        process.wait(WAIT_S)
    assert process.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has drained
