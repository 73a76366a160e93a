"""USB power meters on a serial port: RDTech UM24C/UM25C/UM34C and an INA219 line protocol.

RDTech UM series (USB-C/A testers, Bluetooth SPP, e.g. ``/dev/rfcomm0``): the meter never
sends on its own. One command byte ``0xF0`` asks for a 130-byte record, all fields
big-endian. Offsets: 0 model id (0x0963 UM24C, 0x09C9 UM25C, 0x0D4C UM34C), 2 voltage,
4 current, 6 power (u32, mW), 10 temperature °C, 12 °F; the UM25C reports voltage in
mV and current in 0.1 mA, the others in 10 mV and 1 mA. A UM24C/UM25C record ends in
0xFFF1; a UM34C record ends in an XOR checksum of 32 fixed byte positions. After
garbage the reader slides one byte at a time until a known model id starts the buffer.

Line meter (a microcontroller with an INA219 printing to USB serial), edgeinf's own
protocol, one record per line::

    # edgeinf-power-meter 1            (optional header, ignored)
    <t_ms>,<bus_mV>,<current_mA>[,<power_mW>][*<xx>]

where ``*xx`` is an optional two-hex-digit XOR of the bytes before ``*``. Without the
power field, power is bus voltage x current.

A timeout or an unplugged port raises `SensorError`; the next `read` reopens the port.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

from ...errors import SensorError
from .base import Clock, PowerSample, check_power_mw

log = logging.getLogger(__name__)

UM_POLL = b"\xf0"
UM_RECORD_BYTES = 130


@dataclass(frozen=True)
class UmModel:
    name: str
    model_id: int
    voltage_mv_per_lsb: float
    current_ma_per_lsb: float
    xor_checksum: bool


UM_MODELS = {
    0x0963: UmModel("UM24C", 0x0963, 10.0, 1.0, False),
    0x09C9: UmModel("UM25C", 0x09C9, 1.0, 0.1, False),
    0x0D4C: UmModel("UM34C", 0x0D4C, 10.0, 1.0, True),
}
UM_END_MARKER = 0xFFF1
# Byte positions XORed into the UM34C's last byte.
UM34C_CHECKSUM_POSITIONS = (
    1, 3, 7, 9, 15, 17, 19, 23, 31, 39, 41, 45, 49, 53, 55, 57,
    59, 63, 67, 69, 73, 79, 83, 89, 97, 99, 109, 111, 113, 119, 121, 127,
)  # fmt: skip


def _um34c_checksum(record: bytes | bytearray) -> int:
    value = 0
    for position in UM34C_CHECKSUM_POSITIONS:
        value ^= record[position]
    return value


@dataclass(frozen=True)
class UmRecord:
    """The decoded fields of one UM record."""

    model: str
    voltage_mv: float
    current_ma: float
    power_mw: float
    temp_c: int
    resistance_dohm: int
    recording_s: int


def um_record_valid(record: bytes) -> bool:
    """True when ``record`` is 130 bytes, starts with a known model id and passes its end check."""
    if len(record) != UM_RECORD_BYTES:
        return False
    model = UM_MODELS.get(struct.unpack_from(">H", record, 0)[0])
    if model is None:
        return False
    if model.xor_checksum:
        return _um34c_checksum(record) == record[-1]
    return struct.unpack_from(">H", record, 128)[0] == UM_END_MARKER


def decode_um_record(record: bytes) -> UmRecord:
    """Decodes a record that passed `um_record_valid`.

    Raises:
        SensorError: the record is not a valid UM record.
    """
    if not um_record_valid(record):
        raise SensorError(f"not a valid UM record ({len(record)} bytes, starts {record[:2].hex()})")
    model_id, raw_v, raw_i, power_mw, temp_c = struct.unpack_from(">HHHIH", record, 0)
    model = UM_MODELS[model_id]
    (resistance,) = struct.unpack_from(">I", record, 122)
    (recording_s,) = struct.unpack_from(">I", record, 112)
    return UmRecord(
        model=model.name,
        voltage_mv=raw_v * model.voltage_mv_per_lsb,
        current_ma=raw_i * model.current_ma_per_lsb,
        power_mw=float(power_mw),
        temp_c=temp_c,
        resistance_dohm=resistance,
        recording_s=recording_s,
    )


def encode_um_record(model: str, voltage_mv: float, current_ma: float, temp_c: int = 25) -> bytes:
    """Builds the record a meter would send (for emulators and tests).

    >>> decode_um_record(encode_um_record("UM25C", 5123, 456.7)).power_mw
    2339.0
    """
    spec = next((m for m in UM_MODELS.values() if m.name == model), None)
    if spec is None:
        raise ValueError(f"unknown UM model {model!r}; expected one of {[m.name for m in UM_MODELS.values()]}")
    record = bytearray(UM_RECORD_BYTES)
    raw_v = round(voltage_mv / spec.voltage_mv_per_lsb)
    raw_i = round(current_ma / spec.current_ma_per_lsb)
    power_mw = round(voltage_mv * current_ma / 1000.0)
    struct.pack_into(">HHHIHH", record, 0, spec.model_id, raw_v, raw_i, power_mw, temp_c, round(temp_c * 9 / 5 + 32))
    resistance = round(voltage_mv / current_ma * 10) if current_ma else 9999999
    struct.pack_into(">I", record, 122, resistance)
    if spec.xor_checksum:
        record[-1] = _um34c_checksum(record)
    else:
        struct.pack_into(">H", record, 128, UM_END_MARKER)
    return bytes(record)


class Transport(Protocol):
    """The part of ``serial.Serial`` the meters use (tests may pass a scripted fake)."""

    def write(self, data: bytes) -> Optional[int]: ...
    def read(self, size: int) -> bytes: ...
    def readline(self) -> bytes: ...
    def reset_input_buffer(self) -> None: ...
    def close(self) -> None: ...


def open_serial(port: str, baudrate: int, timeout_s: float) -> Transport:
    """Opens ``port`` with pyserial (the ``serial`` extra).

    Raises:
        SensorError: pyserial is missing or the port cannot be opened.
    """
    try:
        import serial
    except ImportError:
        raise SensorError("serial power meters need pyserial: pip install 'edgeinf[serial]'") from None
    try:
        return serial.serial_for_url(port, baudrate=baudrate, timeout=timeout_s, write_timeout=timeout_s)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise SensorError(f"{port}: cannot open serial port ({exc})") from None


class _SerialSensor:
    def __init__(self, port: str, baudrate: int, timeout_s: float, transport: Optional[Transport], opener, clock):
        self.port = port
        self.baudrate = baudrate
        self.timeout_s = timeout_s
        self.clock = clock
        self._opener = opener
        self._transport = transport
        self.reconnects = 0

    def _port(self) -> Transport:
        if self._transport is None:
            self._transport = self._opener(self.port, self.baudrate, self.timeout_s)
            self.reconnects += 1
        return self._transport

    def _drop(self, why: str) -> SensorError:
        # An unplugged adapter or a dropped Bluetooth link: forget the port, reopen next time.
        if self._transport is not None:
            with contextlib.suppress(Exception):  # closing a dead port may fail in any way
                self._transport.close()
        self._transport = None
        return SensorError(f"{self.port}: {why}")

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None


class UmMeter(_SerialSensor):
    """RDTech UM24C/UM25C/UM34C over a serial port.

    Args:
        port: a device path (``/dev/rfcomm0``) or a pyserial URL.
        baudrate: ignored over Bluetooth; 9600 on the wire.
        timeout_s: how long to wait for a record.
        transport: an already open port (tests); else the port is opened on first read.
        max_resync_bytes: garbage skipped before giving up on one read.
    """

    def __init__(
        self,
        port: str = "",
        baudrate: int = 9600,
        timeout_s: float = 1.0,
        transport: Optional[Transport] = None,
        opener: Callable[[str, int, float], Transport] = open_serial,
        clock: Clock = time.monotonic,
        max_resync_bytes: int = 3 * UM_RECORD_BYTES,
    ):
        super().__init__(port, baudrate, timeout_s, transport, opener, clock)
        self.name = f"um-meter:{port or 'transport'}"
        self.max_resync_bytes = max_resync_bytes
        self.skipped_bytes = 0
        self.last_record: Optional[UmRecord] = None

    def _read_exact(self, transport: Transport, size: int) -> bytes:
        data = transport.read(size)
        if len(data) < size:
            raise self._drop(f"timeout: {len(data)} of {size} bytes within {self.timeout_s} s")
        return data

    def read_record(self) -> UmRecord:
        transport = self._port()
        try:
            transport.reset_input_buffer()
            transport.write(UM_POLL)
            buffer = bytearray(self._read_exact(transport, UM_RECORD_BYTES))
            skipped = 0
            while not um_record_valid(bytes(buffer)):
                if skipped >= self.max_resync_bytes:
                    raise SensorError(f"{self.port}: no valid UM record in {skipped} bytes (not a UM meter?)")
                del buffer[0]
                buffer += self._read_exact(transport, 1)
                skipped += 1
        except SensorError:
            raise
        except OSError as exc:  # serial.SerialException is an OSError
            raise self._drop(f"port failed ({exc})") from None
        if skipped:
            log.warning("%s: skipped %d bytes of garbage before a valid record", self.port, skipped)
            self.skipped_bytes += skipped
        self.last_record = decode_um_record(bytes(buffer))
        return self.last_record

    def read(self) -> PowerSample:
        record = self.read_record()
        return PowerSample(
            timestamp_s=self.clock(),
            power_mw=check_power_mw(record.power_mw, self.name),
            source=f"{self.name} ({record.model})",
            voltage_mv=record.voltage_mv,
            current_ma=record.current_ma,
        )


@dataclass(frozen=True)
class LineRecord:
    t_ms: int
    voltage_mv: float
    current_ma: float
    power_mw: float


def parse_meter_line(line: str) -> LineRecord:
    """Parses one line of the line protocol.

    >>> parse_meter_line("1200,5012,431.5").power_mw
    2162.678
    """
    text = line.strip()
    if "*" in text:
        body, _, checksum = text.partition("*")
        expected = 0
        for byte in body.encode("ascii", "replace"):
            expected ^= byte
        try:
            given = int(checksum, 16)
        except ValueError:
            raise SensorError(f"meter line checksum {checksum!r} is not hex") from None
        if given != expected:
            raise SensorError(f"meter line checksum mismatch: expected {expected:02x}, given {given:02x}")
        text = body
    fields = text.split(",")
    if len(fields) not in (3, 4):
        raise SensorError(f"meter line: expected 't_ms,mV,mA[,mW]', got {line.strip()[:60]!r}")
    try:
        t_ms, voltage, current = int(fields[0]), float(fields[1]), float(fields[2])
        power = float(fields[3]) if len(fields) == 4 else abs(voltage * current) / 1000.0
    except ValueError:
        raise SensorError(f"meter line: non-numeric field in {line.strip()[:60]!r}") from None
    return LineRecord(t_ms, voltage, abs(current), power)


class LineMeter(_SerialSensor):
    """A microcontroller that streams `parse_meter_line` records (the meter pushes; we take the newest).

    Args: as `UmMeter`; ``max_lines`` bounds how many bad lines one read skips.
    """

    def __init__(
        self,
        port: str = "",
        baudrate: int = 115200,
        timeout_s: float = 1.0,
        transport: Optional[Transport] = None,
        opener: Callable[[str, int, float], Transport] = open_serial,
        clock: Clock = time.monotonic,
        max_lines: int = 8,
    ):
        super().__init__(port, baudrate, timeout_s, transport, opener, clock)
        self.name = f"line-meter:{port or 'transport'}"
        self.max_lines = max_lines
        self.bad_lines = 0

    def read(self) -> PowerSample:
        transport = self._port()
        try:
            transport.reset_input_buffer()  # stale lines would lag the measurement
            for _ in range(self.max_lines):
                raw = transport.readline()
                if not raw:
                    raise self._drop(f"timeout: no line within {self.timeout_s} s")
                if not raw.endswith(b"\n"):
                    continue  # partial line cut by the buffer reset or the timeout
                text = raw.decode("ascii", "replace")
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                try:
                    record = parse_meter_line(text)
                except SensorError as exc:
                    self.bad_lines += 1
                    log.debug("%s: %s", self.port, exc)
                    continue
                return PowerSample(
                    timestamp_s=self.clock(),
                    power_mw=check_power_mw(record.power_mw, self.name),
                    source=self.name,
                    voltage_mv=record.voltage_mv,
                    current_ma=record.current_ma,
                )
        except SensorError:
            raise
        except OSError as exc:  # serial.SerialException is an OSError
            raise self._drop(f"port failed ({exc})") from None
        raise SensorError(f"{self.port}: no valid meter line in {self.max_lines} lines")
