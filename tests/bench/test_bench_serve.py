"""bench_serve's load generator and report rows (the servers themselves are in tests/serve)."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


loadgen = load_module("loadgen")


async def with_server(handler, run):
    """``run(url)`` against an asyncio server whose connections ``handler`` answers."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        return await run(f"http://127.0.0.1:{port}/v1/models/face:predict")


def answering(delay_s: float = 0.0, code: int = 200):
    async def handler(reader, writer):
        try:
            while True:
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if not line:
                    return
                await reader.readexactly(length)
                await asyncio.sleep(delay_s)
                writer.write(f"HTTP/1.1 {code} X\r\nContent-Length: 2\r\n\r\nok".encode())
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return handler


async def hanging_up(reader, writer):
    writer.close()


def test_the_closed_loop_counts_every_answer_and_its_code():
    result = asyncio.run(with_server(answering(code=503), lambda url: loadgen.closed_loop(url, b"{}", "x", 2, 0.3)))
    assert result["codes"] and set(result["codes"]) == {503}
    assert len(result["latencies_s"]) == len(result["codes"])


def test_the_open_loop_sends_rate_times_duration_requests():
    result = asyncio.run(with_server(answering(), lambda url: loadgen.open_loop(url, b"{}", "x", 50.0, 4, 0.4)))
    assert result["codes"] == [200] * 20
    assert result["dispatch_lag_p99_s"] >= 0


def test_the_open_loop_counts_latency_from_when_a_request_was_due():
    # 30 requests due in 0.3 s, one connection, 50 ms per answer: the last one answers at least
    # 30 x 50 ms after the start, though it was due at 290 ms. Sending late must not hide that.
    result = asyncio.run(
        with_server(answering(delay_s=0.05), lambda url: loadgen.open_loop(url, b"{}", "x", 100.0, 1, 0.3))
    )
    assert result["codes"] == [200] * 30
    assert max(result["latencies_s"]) >= 30 * 0.05 - 0.29


def test_a_broken_connection_is_code_0():
    result = asyncio.run(with_server(hanging_up, lambda url: loadgen.open_loop(url, b"{}", "x", 20.0, 2, 0.1)))
    assert result["codes"] == [0, 0]


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("numpy")
    return load_module("bench_serve")


def test_report_rows_are_flat_and_pass_only_with_p99_under_the_deadline(bench):
    saturation = ([0.01] * 100, [200] * 100, 1.0)
    fast = {"latencies_s": [0.02] * 99 + [0.03], "codes": [200] * 100, "seconds": 1.25, "dispatch_lag_p99_s": 0.001}
    slow = {**fast, "latencies_s": [0.02] * 97 + [2.0] * 3, "codes": [200] * 97 + [504] * 3}
    rows = [
        bench.report_row("edgeinf", "json", saturation, fast, deadline_ms=100.0),
        bench.report_row("minimal", "json", saturation, slow, deadline_ms=100.0),
        bench.report_row("minimal", "jpeg", ([], [], 1.0), None, deadline_ms=100.0),
    ]
    assert all(list(row) == list(rows[0]) for row in rows)
    assert all(not isinstance(v, (dict, list)) for row in rows for v in row.values())
    good, bad, none = rows
    assert good["saturation_rps"] == 100.0 and good["target_rps"] == 80.0 and good["achieved_rps"] == 80.0
    assert good["p99_within_deadline"] and good["non_200"] == 0 and good["codes"] == "-"
    assert not bad["p99_within_deadline"] and bad["non_200"] == 3 and bad["codes"] == "504: 3"
    assert bad["achieved_rps"] == 97 / 1.25  # answers that were not 200 are no throughput
    assert not none["p99_within_deadline"] and math.isnan(none["p99_ms"])
