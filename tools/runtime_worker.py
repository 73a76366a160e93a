"""Ask a real runtime, in a child process, whether it loads, allocates and invokes a model.

Runtimes can segfault or abort on what they are probed with, so every question runs in
a worker process; a worker that dies is restarted and the question is recorded as
``crashed``. Used by the table generators in tools/ and by the agreement tests.

The worker half of this file runs under any Python that has the runtime (e.g. the numpy<2
environment of tflite-runtime 2.14) and imports nothing from edgeinf.

Protocol: one JSON job per stdin line, one JSON reply per stdout line.
    {"id": 3, "kind": "tflite", "path": "m.tflite", "action": "construct" | "run", "delegate": true}
    {"id": 4, "kind": "ncnn", "path": "m.param", "bin": "m.bin", "inputs": {"in0": [3, 32, 32]}}
Reply: {"id": 3, "ok": bool, "stage": "construct|allocate|invoke|load_param|load_model|extract|done",
        "error": "...", "ops": [{"index", "op_name", "inputs", "outputs"}, ...]}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

# ---------------------------------------------------------------------------------------------
# worker side (runs in the child)


def _ops(it) -> list[dict]:
    return [
        {
            "index": int(o["index"]),
            "op_name": o["op_name"],
            "inputs": [int(v) for v in o["inputs"]],
            "outputs": [int(v) for v in o["outputs"]],
        }
        for o in it._get_ops_details()
    ]


def _tflite(job: dict, package: str, out: dict) -> dict:
    import importlib

    import numpy as np

    interp = importlib.import_module(package + ".interpreter")
    kind = (
        interp.OpResolverType.AUTO
        if job.get("delegate", True)
        else interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    out["stage"] = "construct"
    it = interp.Interpreter(model_path=job["path"], experimental_op_resolver_type=kind, num_threads=1)
    if job.get("action") == "construct":
        return {"stage": "done"}
    out["stage"] = "allocate"
    it.allocate_tensors()
    out["ops"] = _ops(it)  # delegation is decided by now; keep it even if invoke fails
    out["stage"] = "invoke"
    rng = np.random.default_rng(0)
    # positive inputs: a model that runs at all runs on them (no sqrt of negatives, no division by zero)
    for d in it.get_input_details():
        dtype = np.dtype(d["dtype"])
        shape = tuple(d["shape"])
        if dtype.kind == "f":
            x = rng.uniform(0.1, 1.0, size=shape).astype(dtype)
        elif dtype.kind in "iu":
            x = rng.integers(1, 100, size=shape, endpoint=True).astype(dtype)
        elif dtype.kind == "b":
            x = rng.integers(0, 2, size=shape).astype(bool)
        else:
            x = np.zeros(shape, dtype)
        it.set_tensor(d["index"], x)
    it.invoke()
    return {"stage": "done", "ops": out["ops"]}


def _ncnn(job: dict) -> dict:
    import ncnn
    import numpy as np

    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = 1
    load_param = net.load_param_bin if job.get("binary") else net.load_param
    if load_param(job["path"]) != 0:
        return {"stage": "load_param", "error": "load_param failed"}
    bin_path = job.get("bin")
    if bin_path and os.path.exists(bin_path):
        if net.load_model(bin_path) != 0:
            return {"stage": "load_model", "error": "load_model failed"}
    else:
        # no weights: give every layer zeros (how ncnn's own tests load param-only nets)
        if net.load_model(ncnn.DataReaderFromEmpty()) != 0:
            return {"stage": "load_model", "error": "load_model failed"}
    ex = net.create_extractor()
    rng = np.random.default_rng(0)
    keep = []
    for name, shape in (job.get("inputs") or {}).items():
        x = rng.uniform(-1, 1, size=tuple(shape)).astype(np.float32)
        # a Mat wrapping numpy memory segfaults in extract() when the first layer works in place
        # (ncnn 1.0.20261020, ReLU): give ncnn its own copy, and keep it alive until extraction
        mat = ncnn.Mat(x).clone()
        keep.append(mat)
        key = int(name) if job.get("binary") else name  # binary .param files have blob indices, not names
        if ex.input(key, mat) != 0:
            return {"stage": "extract", "error": f"input {name} refused"}
    outputs = [int(i) for i in net.output_indexes()] if job.get("binary") else net.output_names()
    for name in outputs:
        ret, _ = ex.extract(name)
        if ret != 0:
            return {"stage": "extract", "error": f"extract {name} returned {ret}"}
    return {"stage": "done", "layers": [layer.type for layer in net.layers()]}


def _serve(package: str) -> None:
    # the runtimes print to fd 2 (and some to fd 1): keep fd 1 for replies only
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for line in sys.stdin:
        job = json.loads(line)
        progress: dict = {}
        try:
            result = _ncnn(job) if job.get("kind") == "ncnn" else _tflite(job, package, progress)
            result["ok"] = result.get("stage") == "done"
        except Exception as exc:  # the runtime's own error is the answer
            result = dict(progress, ok=False, error=f"{type(exc).__name__}: {exc}")
        result.setdefault("stage", "construct")
        result["id"] = job["id"]
        reply.write(json.dumps(result) + "\n")


# ---------------------------------------------------------------------------------------------
# parent side


class RuntimeWorker:
    """A restartable child process that answers jobs.

    Args:
        python: the interpreter that has the runtime (e.g. /work/venv-legacy/bin/python).
        package: ``ai_edge_litert`` or ``tflite_runtime`` (for TFLite jobs).
        timeout_s: a job running longer is recorded as a hang and its worker killed.
    """

    def __init__(self, python: str = sys.executable, package: str = "ai_edge_litert", timeout_s: float = 60.0):
        self.python, self.package, self.timeout_s = python, package, timeout_s
        self.proc = None
        self.next_id = 0

    def _start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
        self.proc = subprocess.Popen(
            [self.python, os.path.abspath(__file__), "--serve", self.package],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )

    def ask(self, job: dict) -> dict:
        """Run one job; a crash or hang is an answer too (``{"ok": False, "crashed": ...}``)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.next_id += 1
        job = dict(job, id=self.next_id)
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._dead(job)
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.timeout_s
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                return {
                    "ok": False,
                    "stage": "hang",
                    "error": f"no answer within {self.timeout_s} s",
                    "crashed": "hang",
                }
            line = self.proc.stdout.readline()
            if not line:
                return self._dead(job)
            reply = json.loads(line)
            if reply.get("id") == job["id"]:
                return reply

    def _dead(self, job: dict) -> dict:
        code = self.proc.wait()
        self.proc = None
        return {"ok": False, "stage": "crash", "error": f"the runtime process died (exit code {code})", "crashed": code}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def delegate_partitions(ops: list[dict]) -> tuple[list[list[int]], list[int]]:
    """XNNPACK partitions and CPU nodes from an interpreter's op list (parent side only:
    see edgeinf.compat.delegation)."""
    from edgeinf.compat.delegation import delegate_partitions as recover

    return recover(ops)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--serve":
        _serve(sys.argv[2])
    else:
        sys.exit("usage: runtime_worker.py --serve PACKAGE (started by RuntimeWorker)")
