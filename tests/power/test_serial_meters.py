"""UM24C/UM25C/UM34C and the line protocol, spoken by emulators on a pseudo-terminal.

pyserial opens the pty's slave by its device name, exactly as it opens /dev/rfcomm0;
the emulator thread on the master side answers 0xF0 with a 130-byte record.
"""

from __future__ import annotations

import os
import select
import struct
import threading
import time
import tty

import pytest

from edgeinf.errors import SensorError
from edgeinf.power.sensors import (
    LineMeter,
    UmMeter,
    decode_um_record,
    encode_um_record,
    parse_meter_line,
    um_record_valid,
)

pytest.importorskip("serial")  # the `serial` extra; installed in the test environment


class PtyDevice:
    """A device on the master side of a pty; ``respond(request_bytes) -> reply bytes`` per byte received."""

    def __init__(self, respond=None, push=None, push_period_s=0.01):
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.port = os.ttyname(self.slave)
        self.respond = respond
        self.push = push
        self.push_period_s = push_period_s
        self.requests = bytearray()
        self.silent = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        next_push = time.monotonic()
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.005)
            if ready:
                try:
                    data = os.read(self.master, 64)
                except OSError:
                    return
                for byte in data:
                    self.requests.append(byte)
                    if self.respond and not self.silent:
                        os.write(self.master, self.respond(byte))
            if self.push and not self.silent and time.monotonic() >= next_push:
                os.write(self.master, self.push())
                next_push = time.monotonic() + self.push_period_s

    def close(self):
        self._stop.set()
        self._thread.join(2)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def pty_device():
    devices = []

    def make(**kwargs):
        device = PtyDevice(**kwargs)
        devices.append(device)
        return device

    yield make
    for device in devices:
        device.close()


def test_um25c_record_layout_decodes_big_endian_with_um25c_scales():
    record = bytearray(130)
    struct.pack_into(">HHHIHH", record, 0, 0x09C9, 5123, 4567, 2339, 31, 88)
    struct.pack_into(">H", record, 128, 0xFFF1)
    decoded = decode_um_record(bytes(record))
    assert (decoded.model, decoded.voltage_mv, decoded.power_mw, decoded.temp_c) == ("UM25C", 5123.0, 2339.0, 31)
    assert decoded.current_ma == pytest.approx(456.7)  # 0.1 mA per count on the UM25C


def test_um24c_scales_and_um34c_checksum():
    um24 = bytearray(130)
    struct.pack_into(">HHH", um24, 0, 0x0963, 512, 457)
    struct.pack_into(">H", um24, 128, 0xFFF1)
    assert decode_um_record(bytes(um24)).voltage_mv == 5120.0  # 10 mV per count
    assert decode_um_record(bytes(um24)).current_ma == 457.0  # 1 mA per count
    um34 = bytearray(encode_um_record("UM34C", 5120, 457))
    assert um_record_valid(bytes(um34))
    um34[7] ^= 0x40  # a bit flip at a checksummed position
    assert not um_record_valid(bytes(um34))
    um34[6] ^= 0x01  # position 6 is not in the UM34C checksum set
    um34[7] ^= 0x40
    assert um_record_valid(bytes(um34))


def test_um25c_over_pty(pty_device):
    device = pty_device(respond=lambda b: encode_um_record("UM25C", 5123, 456.7) if b == 0xF0 else b"")
    meter = UmMeter(device.port, timeout_s=1.0)
    try:
        sample = meter.read()
        assert sample.voltage_mv == 5123.0 and sample.current_ma == pytest.approx(456.7)
        assert sample.power_mw == 2340.0  # the meter's own power field (mW), rounded by the meter
        assert "UM25C" in sample.source
        assert bytes(device.requests) == b"\xf0"  # exactly one poll byte per read
    finally:
        meter.close()


def test_um_meter_resynchronises_after_garbage(pty_device):
    replies = iter(
        [b"\x13\x37garbage\xff" + encode_um_record("UM24C", 5000, 1000), encode_um_record("UM24C", 5010, 800)]
    )
    device = pty_device(respond=lambda b: next(replies) if b == 0xF0 else b"")
    meter = UmMeter(device.port, timeout_s=1.0)
    try:
        assert meter.read().power_mw == 5000.0
        assert meter.skipped_bytes == 10
        assert meter.read().power_mw == pytest.approx(4008.0)
    finally:
        meter.close()


def test_um_meter_skips_a_record_with_bad_end_marker(pty_device):
    bad = bytearray(encode_um_record("UM25C", 4000, 100))
    bad[129] = 0x00
    replies = iter([bytes(bad) + encode_um_record("UM25C", 5000, 200)])
    device = pty_device(respond=lambda b: next(replies, b""))
    meter = UmMeter(device.port, timeout_s=1.0)
    try:
        assert meter.read().power_mw == 1000.0
        assert meter.skipped_bytes == 130
    finally:
        meter.close()


def test_um_meter_timeout_then_recovery(pty_device):
    device = pty_device(respond=lambda b: encode_um_record("UM25C", 5000, 100))
    meter = UmMeter(device.port, timeout_s=0.2)
    try:
        device.silent = True
        started = time.monotonic()
        with pytest.raises(SensorError, match=r"timeout: 0 of 130 bytes"):
            meter.read()
        assert time.monotonic() - started < 2.0  # bounded by the timeout, never a hang
        device.silent = False
        assert meter.read().power_mw == 500.0  # reopened and read again
        assert meter.reconnects == 2
    finally:
        meter.close()


def test_um_meter_on_a_device_that_is_not_a_meter(pty_device):
    device = pty_device(respond=lambda b: bytes(range(256)) * 4)
    meter = UmMeter(device.port, timeout_s=0.5)
    try:
        with pytest.raises(SensorError, match="no valid UM record"):
            meter.read()
    finally:
        meter.close()


class Unplugging:
    """A transport whose read fails like an unplugged USB adapter (pyserial raises SerialException)."""

    def __init__(self):
        self.closed = False

    def write(self, data):
        return len(data)

    def read(self, size):
        import serial

        raise serial.SerialException("device reports readiness to read but returned no data")

    def reset_input_buffer(self):
        pass

    def close(self):
        self.closed = True


def test_unplugged_meter_raises_and_reopens_next_time():
    dead = Unplugging()
    opened = []

    def opener(port, baud, timeout):
        opened.append(port)
        raise SensorError(f"{port}: cannot open serial port ([Errno 2] No such file or directory)")

    meter = UmMeter("/dev/rfcomm0", transport=dead, opener=opener)
    with pytest.raises(SensorError, match="port failed"):
        meter.read()
    assert dead.closed
    with pytest.raises(SensorError, match="No such file"):
        meter.read()
    assert opened == ["/dev/rfcomm0"]


def test_missing_port_is_a_sensor_error(tmp_path):
    with pytest.raises(SensorError, match="cannot open serial port"):
        UmMeter(str(tmp_path / "ttyUSB9")).read()


def _line(t_ms, mv, ma, with_checksum=True):
    body = f"{t_ms},{mv},{ma}"
    checksum = 0
    for byte in body.encode():
        checksum ^= byte
    return f"{body}*{checksum:02x}\n" if with_checksum else f"{body}\n"


def test_line_protocol_parsing_and_checksum():
    assert parse_meter_line(_line(10, 5000, 420)).power_mw == 2100.0
    assert parse_meter_line("10,5000,420,2111\n").power_mw == 2111.0
    with pytest.raises(SensorError, match="checksum mismatch"):
        parse_meter_line("10,5000,421*" + _line(10, 5000, 420).split("*")[1])
    with pytest.raises(SensorError, match="expected 't_ms,mV,mA"):
        parse_meter_line("Bus Voltage: 5.01 V")
    with pytest.raises(SensorError, match="non-numeric"):
        parse_meter_line("1,five,2")


def test_line_meter_over_pty_skips_header_and_garbage(pty_device):
    stream = iter(
        ["# edgeinf-power-meter 1\n", "\x00\xffnoise\n", "12,50x0,1\n"]
        + [_line(20 + i, 5000, 300) for i in range(10000)]
    )
    device = pty_device(push=lambda: next(stream).encode("latin-1"), push_period_s=0.005)
    meter = LineMeter(device.port, timeout_s=1.0)
    try:
        sample = meter.read()
        assert sample.power_mw == 1500.0 and sample.voltage_mv == 5000.0
    finally:
        meter.close()
