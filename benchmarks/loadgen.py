"""A lean HTTP/1.1 load generator, run as its own process: closed or open loop, keep-alive sockets.

    python benchmarks/loadgen.py closed URL --body FILE --content-type T --connections 8 --duration 5
    python benchmarks/loadgen.py open URL --body FILE --content-type T --rate 100 --connections 32 --duration 10
    python benchmarks/loadgen.py echo-server PORT      # a fixed-answer endpoint: the generator's ceiling

Prints one JSON object: ``latencies_s`` and ``codes`` (one per request, in completion order;
code 0 for a broken connection), ``seconds`` (the measured span) and, in the open loop,
``dispatch_lag_p99_s`` (how late the generator itself handed requests out).

- closed: each connection sends its next request when the previous answer is in; the rate of
  answers is the server's saturation rate.
- open: request i is due at ``start + i / rate`` whatever the server does. A free connection
  sends it; its latency counts from when it was due, so a server that stalls cannot hide the
  stall by making the generator send later (no coordinated omission). With every connection
  busy, due requests wait in the generator and that wait is counted.

One asyncio thread, raw streams and prebuilt request bytes: a request costs the generator a
write and a header parse, tens of microseconds, so it runs far above the rates it measures
(the benchmark reports its ceiling against ``echo-server``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 60.0


class Connection:
    """One keep-alive connection that sends a prebuilt request and reads the answer."""

    def __init__(self, host: str, port: int, request: bytes):
        self.host, self.port, self.request = host, port, request
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self) -> int:
        """One request; the answer's status code, or 0 when the connection broke."""
        try:
            if self.writer is None:
                self.reader, self.writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), CONNECT_TIMEOUT_S
                )
            self.writer.write(self.request)
            return await self._answer()  # no timeout per request (a task each): the run has one
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, IndexError):
            self.close()
            return 0

    async def _answer(self) -> int:
        reader = self.reader
        status = await reader.readline()
        code = int(status.split(b" ", 2)[1])
        length, chunked, keep = 0, False, True
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                keep = b"close" not in value.lower()
        if chunked:
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                await reader.readexactly(size + 2)
                if size == 0:
                    break
        elif length:
            await reader.readexactly(length)
        if not keep:
            self.close()
        return code

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def request_bytes(url: str, body: bytes, content_type: str) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    head = (
        f"POST {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return parts.hostname, parts.port or 80, head.encode() + body


async def closed_loop(url: str, body: bytes, content_type: str, connections: int, duration_s: float) -> dict:
    host, port, request = request_bytes(url, body, content_type)
    latencies, codes = [], []
    begin = time.perf_counter()
    end = begin + duration_s

    async def client():
        connection = Connection(host, port, request)
        while time.perf_counter() < end:
            start = time.perf_counter()
            code = await connection.send()
            latencies.append(time.perf_counter() - start)
            codes.append(code)
        connection.close()

    await _bounded(asyncio.gather(*(client() for _ in range(connections))), duration_s)
    return {"latencies_s": latencies, "codes": codes, "seconds": time.perf_counter() - begin}


async def open_loop(url: str, body: bytes, content_type: str, rate: float, connections: int, duration_s: float) -> dict:
    host, port, request = request_bytes(url, body, content_type)
    count = max(1, int(rate * duration_s))
    latencies, codes, lags = [], [], []
    due: asyncio.Queue = asyncio.Queue()
    begin = time.perf_counter() + 0.05

    async def dispatch():
        for i in range(count):
            scheduled = begin + i / rate
            wait = scheduled - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            lags.append(time.perf_counter() - scheduled)
            due.put_nowait(scheduled)
        for _ in range(connections):
            due.put_nowait(None)

    async def client():
        connection = Connection(host, port, request)
        while (scheduled := await due.get()) is not None:
            code = await connection.send()
            latencies.append(time.perf_counter() - scheduled)  # from when it was due
            codes.append(code)
        connection.close()

    await _bounded(asyncio.gather(dispatch(), *(client() for _ in range(connections))), duration_s)
    codes += [0] * (len(lags) - len(codes))  # due but never answered: the run's timeout ended them
    latencies += [float("inf")] * (len(codes) - len(latencies))
    lags.sort()
    return {
        "latencies_s": latencies,
        "codes": codes,
        "seconds": time.perf_counter() - begin,
        "dispatch_lag_p99_s": lags[min(len(lags) - 1, int(0.99 * len(lags)))],
    }


async def _bounded(run, duration_s: float) -> None:
    """Wait for a loop, giving up ``ANSWER_TIMEOUT_S`` after its duration (a server that hangs)."""
    try:
        await asyncio.wait_for(run, duration_s + ANSWER_TIMEOUT_S)
    except asyncio.TimeoutError:
        print(f"gave up on answers {ANSWER_TIMEOUT_S} s after the run", file=sys.stderr)


async def echo_server(port: int) -> None:
    """Answers every request with a fixed 200: what the generator reaches when the server costs nothing."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nok\n"

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            while True:
                length = 0
                while True:
                    line = await reader.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(answer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("closed", "open", "echo-server"))
    parser.add_argument("target", help="URL to POST to (closed, open) or the port (echo-server)")
    parser.add_argument("--body", help="file holding the request body")
    parser.add_argument("--content-type", default="application/json")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--rate", type=float, help="requests per second (open loop)")
    args = parser.parse_args(argv)
    if args.mode == "echo-server":
        asyncio.run(echo_server(int(args.target)))
        return 0
    body = Path(args.body).read_bytes() if args.body else b""
    if args.mode == "closed":
        result = asyncio.run(closed_loop(args.target, body, args.content_type, args.connections, args.duration))
    else:
        if not args.rate or args.rate <= 0:
            parser.error("the open loop needs --rate > 0")
        result = asyncio.run(
            open_loop(args.target, body, args.content_type, args.rate, args.connections, args.duration)
        )
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
