"""Faults from the outside: slow and vanishing clients, a model stuck mid-call, SIGTERM under load."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import signal
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from serve_helpers import (  # noqa: E402
    WAIT_S,
    Gate,
    ThreadServer,
    face_config,
    free_port,
    gated_loader,
    start_process,
    wait_ready,
    wait_until,
)


def request_bytes(face_input) -> bytes:
    tensor = {"shape": [1, 128, 128, 3], "dtype": "float32", "b64": base64.b64encode(face_input).decode()}
    return json.dumps({"inputs": tensor}).encode()


def raw_request(url: str, body: bytes, content_length: int | None = None) -> tuple[socket.socket, bytes]:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
    head = (
        "POST /v1/models/face:predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body) if content_length is None else content_length}\r\n\r\n"
    )
    return sock, head.encode()


def read_status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1])


def metric(url: str, prefix: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_slow_client_holds_no_one_else_and_is_answered(face_input):
    body = request_bytes(face_input)
    with ThreadServer(face_config()) as server:
        sock, head = raw_request(server.url, body)
        with sock:
            sock.sendall(head)
            pieces = [body[i : i + len(body) // 5 + 1] for i in range(0, len(body), len(body) // 5 + 1)]
            for piece in pieces:
                sock.sendall(piece)
                # Between the slow client's pieces, another client is answered.
                other = httpx.post(f"{server.url}/v1/models/face:predict", content=body, timeout=WAIT_S)
                assert other.status_code == 200
                time.sleep(0.05)
            assert read_status(sock) == 200


def test_a_client_that_stalls_mid_body_gets_408(face_input):
    body = request_bytes(face_input)
    with ThreadServer(face_config(limits={"body_timeout_s": 1.0})) as server:
        sock, head = raw_request(server.url, body)
        with sock:
            sock.sendall(head + body[:1000])
            assert read_status(sock) == 408
        assert httpx.post(f"{server.url}/v1/models/face:predict", content=body).status_code == 200


def test_clients_that_disconnect_mid_body_or_mid_call_break_nothing(face_input):
    body = request_bytes(face_input)
    gate = Gate()
    with ThreadServer(face_config(), loader=gated_loader(gate)) as server:
        sock, head = raw_request(server.url, body)
        sock.sendall(head + body[:1000])
        sock.close()  # gone halfway through its body
        gone = 'edgeinf_serve_requests_total{route="predict",model="face",variant="",code="499"}'
        wait_until(lambda: metric(server.url, gone) == 1, "the disconnect counted")

        gate.hang_next()
        sock, head = raw_request(server.url, body)
        sock.sendall(head + body)
        assert gate.entered.acquire(timeout=WAIT_S)  # its call is running
        sock.close()  # gone while the model works for it
        gate.release()
        served = 'edgeinf_serve_requests_total{route="predict",model="face",variant="default",code="200"}'
        wait_until(lambda: metric(server.url, served) == 1, "the abandoned call finished")
        assert httpx.post(f"{server.url}/v1/models/face:predict", content=body).status_code == 200
        assert server.service.models["face"].variants["default"].pool.live_workers == 1


SLOW_SERVER = """
import sys
sys.path.insert(0, {helpers!r})
from serve_helpers import face_config, slow_loader
import edgeinf.serve

config = face_config(server={{"port": {port}}}, limits={{"queue": 32}})
edgeinf.serve.run(edgeinf.serve.load_config(config), loader=slow_loader(1.0))
"""


@pytest.mark.slow
def test_sigterm_under_load_drains_requests_in_flight(face_input, tmp_path):
    port = free_port()
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER.format(helpers=str(Path(__file__).parent), port=port))
    process = start_process([str(script)])
    url = f"http://127.0.0.1:{port}"
    body = request_bytes(face_input)
    try:
        wait_ready(url, process)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [
                pool.submit(httpx.post, f"{url}/v1/models/face:predict", content=body, timeout=WAIT_S) for _ in range(8)
            ]
            depth = 'edgeinf_serve_queue_depth{model="face",variant="default"'
            wait_until(lambda: metric(url, depth) == 8, "eight requests queued or running")
            process.send_signal(signal.SIGTERM)
            codes = [f.result().status_code for f in futures]
        process.wait(WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert codes == [200] * 8
    assert process.returncode in (0, -signal.SIGTERM)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz")
