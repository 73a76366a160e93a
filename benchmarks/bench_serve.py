"""edgeinf serve vs a minimal Starlette app calling LiteRT directly: requests/s and p50/p99 over HTTP.

    python benchmarks/bench_serve.py [--duration 10] [--rounds 3] [--json benchmarks/results/serve.json]
    python benchmarks/bench_serve.py --quick        # a smoke run (figures not for the report)

The face detector (face_detection_short_range, one runtime thread) behind two servers, each
in its own process on uvicorn:

- edgeinf: ``edgeinf serve`` with the model's default limits (queue, deadline from the probe).
- minimal: one Starlette route that decodes the body, calls LiteRT's ``Interpreter`` directly
  (set_tensor, invoke, get_tensor under a lock, in Starlette's thread pool) and answers the
  same JSON: what a hand-written service does, without limits, metrics or checks.

Two bodies: JSON (the photo as a 1x128x128x3 float32 tensor in base64, outputs in base64)
and the photo's JPEG (decoded, letterboxed and normalized by the server; outputs as lists).

The load generator runs in this process (asyncio + httpx), apart from the servers:
- saturation: a closed loop of --concurrency clients for --duration seconds; the rate of
  answered requests is the server's saturation rate;
- 80 %: an open loop at 80 % of edgeinf's saturation rate (fixed intervals; a latency counts
  from the request's scheduled time, so a stall is not hidden by sending later), whose p99 is
  compared with the deadline edgeinf serve reports in /v1/models.

Contenders are measured in turn, --rounds rounds (A B A B ...), so drift on a shared machine
favours neither; the figures are over all rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgeinf import zoo  # noqa: E402
from edgeinf.bench import document, write_document  # noqa: E402

FACE_IMAGE = {"mean": 127.5, "std": 127.5, "letterbox": True, "resize": "area"}
START_TIMEOUT_S = 120.0


# -- the minimal server (this file, run with --minimal-server PORT) ---------------------------


def minimal_app(model_path: str):
    """A Starlette app calling LiteRT directly: the baseline a hand-written service would be."""
    import threading

    from ai_edge_litert.interpreter import Interpreter
    from PIL import Image
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response
    from starlette.routing import Route

    interpreter = Interpreter(model_path=model_path, num_threads=1)
    interpreter.allocate_tensors()
    lock = threading.Lock()
    inp = interpreter.get_input_details()[0]
    outs = interpreter.get_output_details()

    def infer(x: np.ndarray) -> dict:
        with lock:
            interpreter.set_tensor(inp["index"], x)
            interpreter.invoke()
            return {o["name"]: interpreter.get_tensor(o["index"]) for o in outs}

    def from_json(body: bytes) -> bytes:
        t = json.loads(body)["inputs"]
        x = np.frombuffer(base64.b64decode(t["b64"]), dtype=np.float32).reshape(t["shape"])
        outputs = infer(x)
        encoded = {
            k: {"shape": list(v.shape), "dtype": v.dtype.name, "b64": base64.b64encode(v.tobytes()).decode()}
            for k, v in outputs.items()
        }
        return json.dumps({"outputs": encoded}).encode()

    def from_image(body: bytes) -> bytes:
        with Image.open(io.BytesIO(body)) as image:
            rgb = image.convert("RGB")
        scale = 128 / max(rgb.size)
        w, h = round(rgb.size[0] * scale), round(rgb.size[1] * scale)
        canvas = Image.new("RGB", (128, 128))
        canvas.paste(rgb.resize((w, h), Image.BOX), ((128 - w) // 2, (128 - h) // 2))
        x = ((np.asarray(canvas, dtype=np.float32) - 127.5) / 127.5)[None]
        outputs = infer(np.ascontiguousarray(x))
        encoded = {k: {"shape": list(v.shape), "dtype": v.dtype.name, "data": v.tolist()} for k, v in outputs.items()}
        return json.dumps({"outputs": encoded}).encode()

    async def predict(request):
        body = await request.body()
        image = request.headers.get("content-type", "").startswith("image/")
        payload = await run_in_threadpool(from_image if image else from_json, body)
        return Response(payload, media_type="application/json")

    async def ready(request):
        return Response("ready\n")

    return Starlette(routes=[Route("/v1/models/face:predict", predict, methods=["POST"]), Route("/readyz", ready)])


# -- servers ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(kind: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if kind == "edgeinf":
        config = tmp / "edgeinf.toml"
        image = ", ".join(f"{k} = {json.dumps(v)}" for k, v in FACE_IMAGE.items())
        config.write_text(
            f'[server]\nport = {port}\nlog_level = "warning"\n[limits]\nqueue = 64\n'
            f'[models.face]\npath = "face_detection_short_range"\nthreads = 1\nimage = {{ {image} }}\n'
        )
        command = [sys.executable, "-m", "edgeinf", "serve", "--config", str(config)]
    else:
        command = [sys.executable, __file__, "--minimal-server", str(port)]
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the {kind} server exited: {process.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the {kind} server did not get ready in {START_TIMEOUT_S} s")
        time.sleep(0.1)


# -- load ---------------------------------------------------------------------------------------


async def closed_loop(url: str, body: tuple, concurrency: int, duration_s: float) -> tuple[list, list]:
    import httpx

    latencies, codes = [], []
    content, headers = body
    end = time.perf_counter() + duration_s
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker():
            while time.perf_counter() < end:
                start = time.perf_counter()
                response = await client.post(f"{url}/v1/models/face:predict", content=content, headers=headers)
                latencies.append(time.perf_counter() - start)
                codes.append(response.status_code)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, codes


async def open_loop(url: str, body: tuple, rate: float, duration_s: float) -> tuple[list, list]:
    import httpx

    latencies, codes = [], []
    content, headers = body
    count = max(1, int(rate * duration_s))
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=256)) as client:

        async def one(scheduled: float):
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
            response = await client.post(f"{url}/v1/models/face:predict", content=content, headers=headers)
            latencies.append(time.perf_counter() - scheduled)  # from when it was due
            codes.append(response.status_code)

        begin = time.perf_counter() + 0.05
        await asyncio.gather(*(one(begin + i / rate) for i in range(count)))
    return latencies, codes


def summary(latencies: list, codes: list, seconds: float) -> dict:
    ok = [t for t, c in zip(latencies, codes) if c == 200]
    q = np.percentile(ok, [50, 99]) * 1e3 if ok else [float("nan")] * 2
    return {
        "requests": len(codes),
        "ok": len(ok),
        "rps": len(ok) / seconds,
        "p50_ms": float(q[0]),
        "p99_ms": float(q[1]),
        "errors": {str(c): codes.count(c) for c in sorted(set(codes)) if c != 200},
    }


def bodies() -> dict:
    from PIL import Image

    jpeg = zoo.path("grace_hopper").read_bytes()
    with Image.open(io.BytesIO(jpeg)) as image:
        small = np.asarray(image.convert("RGB").resize((128, 128)), dtype=np.float32)
    x = ((small - 127.5) / 127.5)[None]
    tensor = {"shape": list(x.shape), "dtype": "float32", "b64": base64.b64encode(x.tobytes()).decode()}
    as_json = json.dumps({"inputs": tensor, "encoding": "b64"}).encode()
    return {
        "json": (as_json, {"Content-Type": "application/json"}),
        "jpeg": (jpeg, {"Content-Type": "image/jpeg"}),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of measurements (contenders interleaved)")
    parser.add_argument("--concurrency", type=int, default=8, help="clients of the closed loop")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 s, one round")
    parser.add_argument("--minimal-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.minimal_server is not None:
        import uvicorn

        app = minimal_app(str(zoo.path("face_detection_short_range")))
        uvicorn.run(app, host="127.0.0.1", port=args.minimal_server, log_level="warning")
        return 0
    if args.quick:
        args.duration, args.rounds = 1.0, 1
    requests = bodies()
    contenders = ("edgeinf", "minimal")
    saturation = {(c, b): ([], [], 0.0) for c in contenders for b in requests}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {c: start(c, Path(tmp)) for c in contenders}
        try:
            import httpx

            info = httpx.get(f"{servers['edgeinf'][1]}/v1/models").json()["models"][0]["variants"]["default"]
            for _ in range(args.rounds):
                for body_name, body in requests.items():
                    for contender in contenders:
                        start_s = time.perf_counter()
                        lat, codes = asyncio.run(
                            closed_loop(servers[contender][1], body, args.concurrency, args.duration)
                        )
                        a, b, s = saturation[(contender, body_name)]
                        saturation[(contender, body_name)] = (a + lat, b + codes, s + time.perf_counter() - start_s)
            rows = []
            for (contender, body_name), (lat, codes, seconds) in saturation.items():
                print(contender, body_name, "answers:", {c: codes.count(c) for c in set(codes)}, file=sys.stderr)
                rows.append(
                    {"server": contender, "body": body_name, "load": "saturation", **summary(lat, codes, seconds)}
                )
            for body_name, body in requests.items():
                rate = 0.8 * next(r["rps"] for r in rows if r["server"] == "edgeinf" and r["body"] == body_name)
                if rate <= 0:
                    print(f"edgeinf answered no {body_name} request at saturation: no open loop", file=sys.stderr)
                    continue
                lat, codes = asyncio.run(open_loop(servers["edgeinf"][1], body, rate, args.duration * args.rounds))
                rows.append(
                    {
                        "server": "edgeinf",
                        "body": body_name,
                        "load": "80% open loop",
                        **summary(lat, codes, args.duration * args.rounds),
                    }
                )
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(60)
    deadline_ms = info["deadline_s"] * 1e3
    for row in rows:
        row["deadline_ms"] = deadline_ms
        row["p99_within_deadline"] = row["p99_ms"] <= deadline_ms if row["server"] == "edgeinf" else None
        row["errors"] = ", ".join(f"{k}: {v}" for k, v in row["errors"].items()) or "-"
        print(
            f"{row['server']:8s} {row['body']:5s} {row['load']:14s} {row['rps']:8.1f} req/s  "
            f"p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms  errors {row['errors']}"
        )
    print(f"edgeinf's deadline: {deadline_ms:.1f} ms (probe p50 {info['probe_p50_s'] * 1e3:.2f} ms)")
    if args.json:
        doc = document(
            "serve",
            "edgeinf serve vs a minimal Starlette app on LiteRT: req/s, p50/p99 (face detector, JSON and JPEG)",
            quick=args.quick,
            settings={"duration_s": args.duration, "rounds": args.rounds, "concurrency": args.concurrency},
            rows=rows,
        )
        write_document(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
