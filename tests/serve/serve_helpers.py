"""Servers on free loopback ports, and models that misbehave on purpose, for tests/serve."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

import edgeinf
from edgeinf.serve import build_app, load_config
from edgeinf.serve.registry import default_loader

REPO = Path(__file__).resolve().parents[2]
FACE_IMAGE = {"mean": 127.5, "std": 127.5, "letterbox": True, "resize": "area"}
WAIT_S = 120.0  # generous: the tests also run on an emulated Pi


def loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def free_port() -> int:
    with contextlib.closing(loopback_socket()) as sock:
        return sock.getsockname()[1]


def face_config(**overrides) -> dict:
    """A config dict serving the real face detector as model ``face``."""
    # A deadline far above a call's time on a busy or emulated host (the tests of deadlines set their own).
    model = {"path": "face_detection_short_range", "image": dict(FACE_IMAGE), "deadline_s": 60.0}
    model.update(overrides.pop("model", {}))
    config = {"models": {"face": model}}
    config.update(overrides)
    return config


def wait_until(predicate, what: str, timeout_s: float = WAIT_S, interval_s: float = 0.02):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout_s} s")
        time.sleep(interval_s)


class ThreadServer:
    """uvicorn on a thread of this process, on a free loopback port."""

    def __init__(self, config, **options):
        import uvicorn

        if isinstance(config, dict):
            config = load_config(config)
        self.app = build_app(config, **options)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=30
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def service(self):
        return self.app.state.service

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), "the server to start")
        if not self.server.started:
            raise RuntimeError("the server failed to start (see the log above)")
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)


def start_process(args: list[str], env: dict | None = None) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, *args],
        env=environment,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_ready(url: str, process: subprocess.Popen | None = None) -> None:
    def ready():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}:\n{process.stdout.read()}")
        try:
            return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(ready, f"{url}/readyz", interval_s=0.1)


# -- models that misbehave on purpose (through the service's loader) ----------------------------


class Wrapped:
    """A real Model with a hook before each call; everything else is the model's."""

    def __init__(self, model, before):
        self._model = model
        self._before = before

    def run(self, *args, **kwargs):
        self._before()
        return self._model.run(*args, **kwargs)

    def run_image(self, *args, **kwargs):
        self._before()
        return self._model.run_image(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


class Gate:
    """Hangs chosen calls (a hung model) until released; ``entered`` counts calls that hung."""

    def __init__(self):
        self.open = threading.Event()
        self.entered = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._hangs = 0

    def hang_next(self, calls: int = 1):
        """The next ``calls`` calls hang."""
        with self._lock:
            self.open.clear()
            self._hangs += calls

    def release(self):
        self.open.set()

    def __call__(self):
        with self._lock:
            hang = self._hangs > 0
            self._hangs -= hang
        if hang:
            self.entered.release()
            self.open.wait(WAIT_S)


def gated_loader(gate: Gate):
    def load(path, config):
        return Wrapped(default_loader(path, config), gate)

    return load


def failing_when(armed: threading.Event, marker: str):
    """A loader whose models from files named with ``marker`` fail every call while ``armed`` is set."""

    def load(path, config):
        model = default_loader(path, config)
        if marker not in Path(path).name:
            return model

        def before():
            if armed.is_set():
                raise edgeinf.RuntimeFailure("injected: the runtime failed")

        return Wrapped(model, before)

    return load


def slow_loader(seconds: float):
    """Models whose calls take ``seconds`` longer on the service's workers (the load probe is not slowed)."""

    def before():
        if threading.current_thread().name.startswith("edgeinf-serve"):
            time.sleep(seconds)

    def load(path, config):
        return Wrapped(default_loader(path, config), before)

    return load
