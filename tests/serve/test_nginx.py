"""Two `edgeinf serve` devices behind a real nginx, with the example's upstream and server blocks."""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from serve_helpers import REPO, WAIT_S, free_port, start_process, wait_ready, wait_until  # noqa: E402

from edgeinf.serve import load_config  # noqa: E402

EXAMPLE = REPO / "examples" / "serve"
KEY = "nginx-test-key-0123456789"


def test_example_config_loads(tmp_path):
    for name in ("edgeinf.toml",):
        shutil.copyfile(EXAMPLE / name, tmp_path / name)
    (tmp_path / "keys.txt").write_text(f"{KEY}\n")
    (tmp_path / "admin-keys.txt").write_text(f"# admins\n{KEY}-admin\n")
    config = load_config(tmp_path / "edgeinf.toml")
    assert config.host == "0.0.0.0" and config.keys == (KEY,) and config.admin_keys == (KEY + "-admin",)
    face = config.models["face"]
    assert [v.name for v in face.variants] == ["default", "int8"] and face.variants[1].compare == 0.05


def nginx_conf(tmp_path: Path, devices: list[int], port: int) -> Path:
    """The example's upstream and server blocks, on these loopback ports, in a main config of its own."""
    site = (EXAMPLE / "edgeinf-upstream.conf").read_text()
    servers = "".join(f"    server 127.0.0.1:{p} max_fails=3 fail_timeout=10s;\n" for p in devices)
    site = re.sub(r"(    server \S+:8080[^\n]*\n)+", servers, site)
    site = site.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    assert servers in site and f"127.0.0.1:{port}" in site
    (tmp_path / "edgeinf-upstream.conf").write_text(site)
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must reach the temp dirs under tmp_path
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
        "events { worker_connections 64; }\n"
        f"http {{\n  access_log {tmp_path}/access.log;\n  client_body_temp_path {tmp_path}/body;\n"
        f"  proxy_temp_path {tmp_path}/proxy;\n  fastcgi_temp_path {tmp_path}/fastcgi;\n"
        f"  uwsgi_temp_path {tmp_path}/uwsgi;\n  scgi_temp_path {tmp_path}/scgi;\n"
        "  include edgeinf-upstream.conf;\n}\n"
    )
    return conf


def served(url: str) -> float:
    line = 'edgeinf_serve_requests_total{route="predict",model="face",variant="default",code="200"}'
    for text in httpx.get(f"{url}/metrics", headers={"X-API-Key": KEY}).text.splitlines():
        if text.startswith(line):
            return float(text.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.slow
def test_two_devices_behind_nginx_share_the_load_and_fail_over(tmp_path, face_input):
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx is None:
        pytest.skip("nginx is not installed (apt-get install nginx)")
    ports = [free_port(), free_port()]
    devices, urls = [], []
    for i, port in enumerate(ports):
        config = tmp_path / f"device{i}.toml"
        config.write_text(
            f'[server]\nport = {port}\n[auth]\nkeys = ["{KEY}"]\n'
            '[models.face]\npath = "face_detection_short_range"\ndeadline_s = 60.0\n'
        )
        devices.append(start_process(["-m", "edgeinf", "serve", "--config", str(config)]))
        urls.append(f"http://127.0.0.1:{port}")
    balancer_port = free_port()
    conf = nginx_conf(tmp_path, ports, balancer_port)
    balancer = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(conf)], stderr=subprocess.PIPE, text=True)
    balancer_url = f"http://127.0.0.1:{balancer_port}"
    tensor = {"shape": [1, 128, 128, 3], "dtype": "float32", "b64": base64.b64encode(face_input).decode()}
    headers = {"X-API-Key": KEY}
    try:
        for device, url in zip(devices, urls):
            wait_ready(url, device)

        def through_nginx() -> httpx.Response:
            return httpx.post(f"{balancer_url}/v1/models/face:predict", json={"inputs": tensor}, headers=headers)

        def nginx_up():
            try:
                return httpx.get(f"{balancer_url}/v1/models", headers=headers).status_code == 200
            except httpx.TransportError:
                assert balancer.poll() is None, balancer.stderr.read()
                return False

        wait_until(nginx_up, "nginx to listen", interval_s=0.1)
        for _ in range(20):
            response = through_nginx()
            assert response.status_code == 200 and response.headers["x-model-variant"] == "default"
        assert all(served(url) > 0 for url in urls), [served(url) for url in urls]  # both devices worked
        assert through_nginx().status_code == 200
        assert httpx.post(f"{balancer_url}/v1/models/face:reload", headers=headers).status_code == 404

        devices[0].send_signal(signal.SIGTERM)  # one device leaves: nginx passes its share to the other
        devices[0].wait(WAIT_S)
        before = served(urls[1])
        codes = [through_nginx().status_code for _ in range(10)]
        assert codes == [200] * 10
        assert served(urls[1]) == before + 10
    finally:
        balancer.terminate()
        balancer.wait(WAIT_S)
        for device in devices:
            if device.poll() is None:
                device.terminate()
                device.wait(WAIT_S)
