"""The metrics exporter keeps serving scrapes while other clients stall."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from edgeinf import metrics


def connect(exporter, send: bytes = b"") -> socket.socket:
    client = socket.create_connection((exporter.host, exporter.port), timeout=30)
    if send:
        client.sendall(send)
    return client


def scrape(exporter) -> str:
    with urllib.request.urlopen(exporter.url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def still_open(client: socket.socket) -> bool:
    """True while the server neither answered nor closed the connection."""
    client.setblocking(False)
    try:
        return client.recv(1) != b""  # a byte would be an answer to an incomplete request
    except BlockingIOError:
        return True
    except ConnectionError:
        return False
    finally:
        client.settimeout(30)


def closed_by_server(client: socket.socket) -> bool:
    try:
        return client.recv(1) == b""
    except ConnectionError:
        return True


@pytest.mark.parametrize(
    "stall",
    [b"", b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"GE"],
    ids=["silent", "headers-unfinished", "request-line-unfinished"],
)
def test_a_stalled_client_does_not_hold_off_another_scrape(stall):
    with metrics.serve(port=0) as exporter:
        stalled = [connect(exporter, stall) for _ in range(3)]
        try:
            body = scrape(exporter)
            assert body == "\n" or body.startswith("# HELP")
            # The scrape was answered while every stalled client was still being waited on,
            # not after the server gave up on them.
            states = [still_open(client) for client in stalled]
            assert all(states), f"the scrape was answered only after stalled clients were dropped: {states}"
        finally:
            for client in stalled:
                client.close()


def test_a_stalled_client_is_dropped_after_the_timeout():
    with metrics.serve(port=0, timeout_s=0.2) as exporter:
        with connect(exporter, b"GET /metrics HTTP/1.1\r\n") as stalled:
            assert closed_by_server(stalled)  # blocks until the server drops it (socket timeout 30 s)
        assert scrape(exporter)


def test_connections_past_the_cap_are_refused_not_queued():
    with metrics.serve(port=0, max_connections=1) as exporter:
        stalled = connect(exporter)
        try:
            with pytest.raises((urllib.error.URLError, ConnectionError)):
                scrape(exporter)
        finally:
            stalled.close()
        # The slot comes back once the stalled client leaves (its thread notices the close).
        for _ in range(200):
            try:
                assert scrape(exporter)
                break
            except (urllib.error.URLError, ConnectionError):
                continue
        else:
            pytest.fail("the exporter never served again after the stalled client left")


def test_exporter_arguments_are_checked():
    with pytest.raises(ValueError, match="timeout_s"):
        metrics.serve(port=0, timeout_s=0)
    with pytest.raises(ValueError, match="max_connections"):
        metrics.serve(port=0, max_connections=0)


class FlakyCollector:
    failing = True

    def prometheus_families(self):
        if self.failing:
            raise RuntimeError("this collector is broken")
        return []


def test_a_failing_collector_gives_500_and_the_exporter_keeps_serving():
    collector = FlakyCollector()
    metrics.register_collector(collector)
    with metrics.serve(port=0) as exporter:
        with pytest.raises(urllib.error.HTTPError) as err:
            scrape(exporter)
        assert err.value.code == 500
        collector.failing = False
        assert scrape(exporter).endswith("\n")
