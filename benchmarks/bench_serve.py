"""edgeinf serve vs a minimal Starlette app calling LiteRT directly: requests/s and p50/p99 over HTTP.

    python benchmarks/bench_serve.py [--duration 5] [--rounds 2] [--open-duration 15] [--json benchmarks/results/serve.json]
    python benchmarks/bench_serve.py --quick        # a smoke run (figures not for the report)

The face detector (face_detection_short_range) behind two servers, each in its own process on
uvicorn:

- edgeinf: ``edgeinf serve`` with the model's default limits (queue, deadline from the probe).
- minimal: one Starlette route that decodes the body, calls LiteRT's ``Interpreter`` directly
  (set_tensor, invoke, get_tensor under a lock, in Starlette's thread pool) and answers the
  same JSON: what a hand-written service does, without limits, metrics or checks.

Two bodies: JSON (the photo as a 1x128x128x3 float32 tensor in base64, outputs in base64)
and the photo's JPEG (decoded, letterboxed and normalized by the server; outputs as lists).

The load comes from ``benchmarks/loadgen.py`` in processes of its own (one asyncio thread,
keep-alive sockets, prebuilt requests), so the servers never share an interpreter with it:
- ceiling: first, the generator against a fixed-answer endpoint (closed loop): the rate it
  reaches when the server costs nothing, far above the servers' rates below;
- saturation: a closed loop of --concurrency connections for --duration seconds per round;
  the rate of answers is the server's saturation rate;
- 80 %: an open loop at 80 % of each server's own saturation rate for --open-duration seconds
  (request i due at ``i / rate``, at most --open-connections in flight; a latency counts from
  when the request was due, so a stall is not hidden by sending later). Its p99, over every
  answer whatever its code, passes when it is under the deadline edgeinf serve reports in
  /v1/models (the minimal app has none: edgeinf's is its yardstick).

Threads, for a small host (2 cores here): each model runs on one runtime thread, BLAS and
OpenMP pools are held to one thread (``OMP_NUM_THREADS=1`` ...), and the generator is a single
thread, so server and generator fit without either starting a pool per core. Nothing is
pinned to a core: on 2 cores a pinned server would lose the second core its decoding uses.

Saturation is measured in rounds (A B A B ...), so drift on a shared machine favours neither
contender; the open loops follow, interleaved the same way. Compare ratios from one run.
"""

from __future__ import annotations

import argparse
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
    if kind == "edgeinf":
        config = tmp / "edgeinf.toml"
        image = ", ".join(f"{k} = {json.dumps(v)}" for k, v in FACE_IMAGE.items())
        config.write_text(
            f'[server]\nport = {port}\nlog_level = "warning"\n'
            f'[models.face]\npath = "face_detection_short_range"\nthreads = 1\nimage = {{ {image} }}\n'
        )
        command = [sys.executable, "-m", "edgeinf", "serve", "--config", str(config)]
    else:
        command = [sys.executable, __file__, "--minimal-server", str(port)]
    log = tmp / f"{kind}.log"  # a file, not a pipe: a pipe nobody reads would stall a server that logs
    with open(log, "wb") as stderr:
        process = subprocess.Popen(command, env=quiet_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the {kind} server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the {kind} server did not get ready in {START_TIMEOUT_S} s")
        time.sleep(0.1)


# -- load (benchmarks/loadgen.py, in its own process) -------------------------------------------

LOADGEN = Path(__file__).with_name("loadgen.py")
PREDICT = "/v1/models/face:predict"


def generate(mode: str, url: str, body_file: Path, content_type: str, *options: str) -> dict:
    """Run the load generator once; its JSON result."""
    command = [sys.executable, str(LOADGEN), mode, url, "--body", str(body_file), "--content-type", content_type]
    done = subprocess.run([*command, *options], capture_output=True, text=True, env=quiet_env(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the load generator failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def generator_ceiling(tmp: Path, concurrency: int, duration_s: float) -> float:
    """Answers per second of the generator against a fixed-answer endpoint (its own ceiling)."""
    port = free_port()
    echo = subprocess.Popen([sys.executable, str(LOADGEN), "echo-server", str(port)], env=quiet_env())
    try:
        body = tmp / "ceiling.json"
        body.write_text("{}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the fixed-answer endpoint did not start") from None
                time.sleep(0.05)
        result = generate(
            "closed",
            f"http://127.0.0.1:{port}/",
            body,
            "application/json",
            "--connections",
            str(concurrency),
            "--duration",
            str(duration_s),
        )
        return sum(c == 200 for c in result["codes"]) / result["seconds"]
    finally:
        echo.terminate()
        echo.wait(30)


def summary(latencies: list, codes: list, seconds: float) -> dict:
    """Rate of 200s, p50/p99 over every answer (a 504 counts with its time), and the other codes."""
    answered = np.asarray(latencies, dtype=np.float64)
    q = np.percentile(answered, [50, 99]) * 1e3 if answered.size else [float("nan")] * 2
    non_ok = [c for c in codes if c != 200]
    return {
        "requests": len(codes),
        "rps": (len(codes) - len(non_ok)) / seconds if seconds > 0 else float("nan"),
        "p50_ms": float(q[0]),
        "p99_ms": float(q[1]),
        "non_200": len(non_ok),
        "codes": {str(c): non_ok.count(c) for c in sorted(set(non_ok))},
    }


def report_row(server: str, body: str, saturation: tuple, at80: dict | None, deadline_ms: float) -> dict:
    """One flat row: saturation, then the 80 % open loop (NaN when there was none) against the deadline.

    Args:
        saturation: the closed loops' ``(latencies_s, codes, seconds)``, all rounds together.
        at80: the open loop's result from the load generator, or None.
    """
    sat = summary(*saturation)
    nan = float("nan")
    load = summary(at80["latencies_s"], at80["codes"], at80["seconds"]) if at80 else None
    return {
        "server": server,
        "body": body,
        "saturation_rps": sat["rps"],
        "saturation_p50_ms": sat["p50_ms"],
        "saturation_p99_ms": sat["p99_ms"],
        "saturation_non_200": sat["non_200"],
        "target_rps": 0.8 * sat["rps"],
        "achieved_rps": load["rps"] if load else nan,
        "p50_ms": load["p50_ms"] if load else nan,
        "p99_ms": load["p99_ms"] if load else nan,
        "non_200": load["non_200"] if load else 0,
        "codes": ", ".join(f"{c}: {n}" for c, n in load["codes"].items()) if load and load["codes"] else "-",
        "generator_lag_p99_ms": at80["dispatch_lag_p99_s"] * 1e3 if at80 else nan,
        "deadline_ms": deadline_ms,
        "p99_within_deadline": bool(load is not None and load["p99_ms"] < deadline_ms),
    }


def bodies(tmp: Path) -> dict:
    """Body name -> (file holding it, content type)."""
    from PIL import Image

    jpeg = zoo.path("grace_hopper").read_bytes()
    with Image.open(io.BytesIO(jpeg)) as image:
        small = np.asarray(image.convert("RGB").resize((128, 128)), dtype=np.float32)
    x = ((small - 127.5) / 127.5)[None]
    tensor = {"shape": list(x.shape), "dtype": "float32", "b64": base64.b64encode(x.tobytes()).decode()}
    (tmp / "body.json").write_text(json.dumps({"inputs": tensor, "encoding": "b64"}))
    (tmp / "body.jpeg").write_bytes(jpeg)
    return {"json": (tmp / "body.json", "application/json"), "jpeg": (tmp / "body.jpeg", "image/jpeg")}


def quiet_env() -> dict:
    """The environment of every process here: our tree first, one thread per BLAS/OpenMP pool."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    return {**os.environ, **threads, "PYTHONPATH": path}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per saturation measurement")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of saturation (contenders interleaved)")
    parser.add_argument("--concurrency", type=int, default=4, help="connections of the closed loop")
    parser.add_argument("--open-duration", type=float, default=15.0, help="seconds of each 80 %% open loop")
    parser.add_argument("--open-connections", type=int, default=32, help="at most this many requests in flight")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 s saturation, 3 s open loops")
    parser.add_argument("--minimal-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.minimal_server is not None:
        import uvicorn

        app = minimal_app(str(zoo.path("face_detection_short_range")))
        uvicorn.run(app, host="127.0.0.1", port=args.minimal_server, log_level="warning")
        return 0
    if args.quick:
        args.duration, args.rounds, args.open_duration = 1.0, 1, 3.0
    contenders = ("edgeinf", "minimal")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        requests = bodies(tmp)
        ceiling = generator_ceiling(tmp, args.concurrency, min(args.duration, 3.0))
        print(f"load generator's ceiling (fixed-answer endpoint): {ceiling:.0f} req/s", file=sys.stderr)
        servers = {c: start(c, tmp) for c in contenders}
        try:
            import httpx

            info = httpx.get(f"{servers['edgeinf'][1]}/v1/models").json()["models"][0]["variants"]["default"]
            deadline_ms = info["deadline_s"] * 1e3
            saturation = {(c, b): ([], [], 0.0) for b in requests for c in contenders}
            for _ in range(args.rounds):
                for body_name, (body_file, content_type) in requests.items():
                    for contender in contenders:
                        result = generate(
                            "closed",
                            servers[contender][1] + PREDICT,
                            body_file,
                            content_type,
                            "--connections",
                            str(args.concurrency),
                            "--duration",
                            str(args.duration),
                        )
                        lat, codes, seconds = saturation[(contender, body_name)]
                        saturation[(contender, body_name)] = (
                            lat + result["latencies_s"],
                            codes + result["codes"],
                            seconds + result["seconds"],
                        )
            rows = []
            for (contender, body_name), (lat, codes, seconds) in saturation.items():
                rate = 0.8 * summary(lat, codes, seconds)["rps"]
                at80 = None
                if rate > 0:
                    body_file, content_type = requests[body_name]
                    at80 = generate(
                        "open",
                        servers[contender][1] + PREDICT,
                        body_file,
                        content_type,
                        "--rate",
                        f"{rate:.3f}",
                        "--connections",
                        str(args.open_connections),
                        "--duration",
                        str(args.open_duration),
                    )
                row = report_row(contender, body_name, (lat, codes, seconds), at80, deadline_ms)
                rows.append({**row, "generator_ceiling_rps": ceiling})  # in every row: the rendered table shows it
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(60)
    print(
        f"load generator's ceiling: {ceiling:.0f} req/s; edgeinf's deadline {deadline_ms:.1f} ms "
        f"(probe p50 {info['probe_p50_s'] * 1e3:.2f} ms)"
    )
    print(
        f"{'server':8s} {'body':5s} {'sat req/s':>9s} | at 80 %: {'target':>7s} {'got':>7s} {'p50 ms':>8s} "
        f"{'p99 ms':>8s} {'non-200':>7s}  p99 < deadline"
    )
    for row in rows:
        print(
            f"{row['server']:8s} {row['body']:5s} {row['saturation_rps']:9.1f} |          "
            f"{row['target_rps']:7.1f} {row['achieved_rps']:7.1f} {row['p50_ms']:8.2f} "
            f"{row['p99_ms']:8.2f} {row['non_200']:7d}  {'pass' if row['p99_within_deadline'] else 'FAIL'}"
            + (f"  ({row['codes']})" if row["non_200"] else "")
        )
    if args.json:
        doc = document(
            "serve",
            "edgeinf serve vs a minimal Starlette app on LiteRT: saturation req/s, p50/p99 at 80 % (face detector, JSON and JPEG)",
            quick=args.quick,
            settings={
                "duration_s": args.duration,
                "rounds": args.rounds,
                "concurrency": args.concurrency,
                "open_duration_s": args.open_duration,
                "open_connections": args.open_connections,
            },
            generator_ceiling_rps=ceiling,
            deadline_ms=deadline_ms,
            probe_p50_ms=info["probe_p50_s"] * 1e3,
            rows=rows,
        )
        write_document(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
