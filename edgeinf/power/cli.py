"""``edgeinf power``: what this machine can measure, and live readings.

edgeinf power --once                 # sensors, total, temperatures, cpufreq; one reading each
edgeinf power --interval 0.5         # live total power and integrated energy until Ctrl-C
edgeinf power --json --once          # the same as JSON
edgeinf power --root /tmp/fake-sys   # read a fake tree (tests, replay)
edgeinf power --serial /dev/rfcomm0  # add a UM25C; "PORT@line" for the line-protocol meter
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from ..errors import SensorError
from .discover import Discovery, discover
from .sensors.base import EnergyMeter, PowerSensor

MAX_INTERVAL_S = 86400


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("power", help="show power sensors and live readings")
    p.add_argument("--root", default="/", help="directory that stands for / (a fake sysfs tree)")
    p.add_argument("--once", action="store_true", help="one reading of every sensor, then exit")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between live readings (default 1)")
    p.add_argument("--count", type=int, default=0, help="stop after this many live readings (0 = until Ctrl-C)")
    p.add_argument("--vcgencmd", default="vcgencmd", help="the Raspberry Pi vcgencmd to use")
    p.add_argument("--tegrastats", default=None, help="a tegrastats to run when no Jetson rails are in sysfs")
    p.add_argument("--serial", action="append", default=[], metavar="PORT[@um|@line]", help="an external USB meter")
    p.set_defaults(func=run)


def _read(sensor) -> dict:
    try:
        sample = sensor.read()
    except SensorError as exc:
        return {"sensor": sensor.name, "error": str(exc)}
    row = {"sensor": sensor.name, "power_mw": round(sample.power_mw, 3)}
    for key in ("voltage_mv", "current_ma", "energy_uj"):
        value = getattr(sample, key)
        if value is not None:
            row[key] = value
    if sample.status:
        row["status"] = sample.status
    if sample.estimated:
        row["estimated"] = True
    return row


def _temperature(zone) -> dict:
    try:
        return {"zone": zone.name, "temp_mc": zone.read().temp_mc}
    except SensorError as exc:
        return {"zone": zone.name, "error": str(exc)}


def snapshot(found: Discovery) -> dict:
    """One reading of everything `discover` found, as plain data."""
    return {
        "total": {"sensor": found.total.name, "reason": found.total_reason, **_read(found.total)}
        if found.total
        else None,
        "total_reason": found.total_reason,
        "power": [_read(sensor) for sensor in found.power],
        "thermal": [_temperature(zone) for zone in found.thermal],
        "cpufreq": [policy.describe() for policy in found.cpufreq],
        "unavailable": [{"sensor": name, "reason": reason} for name, reason in found.unavailable],
        "throttled": None
        if found.throttled is None
        else {"raw": hex(found.throttled.raw), "flags": found.throttled.active()},
    }


def _print_snapshot(data: dict) -> None:
    total = data["total"]
    if total:
        value = f"{total['power_mw'] / 1000:.3f} W" if "power_mw" in total else f"error: {total['error']}"
        print(f"total      {value}  [{total['sensor']}: {total['reason']}]")
    else:
        print(f"total      none ({data['total_reason']})")
    for row in data["power"]:
        value = f"{row['power_mw'] / 1000:.3f} W" if "power_mw" in row else f"error: {row['error']}"
        extra = "".join(f"  {k}={row[k]}" for k in ("voltage_mv", "current_ma", "status") if k in row)
        print(f"power      {row['sensor']:<40} {value}{extra}")
    for row in data["thermal"]:
        value = f"{row['temp_mc'] / 1000:.1f} °C" if "temp_mc" in row else f"error: {row['error']}"
        print(f"thermal    {row['zone']:<40} {value}")
    for row in data["cpufreq"]:
        if "error" in row:
            print(f"cpufreq    {row['policy']:<40} error: {row['error']}")
            continue
        state = "writable" if row["writable"] else "read-only"
        print(f"cpufreq    {row['policy']:<40} {row['governor']} {row['min_khz']}-{row['max_khz']} kHz ({state})")
    if data["throttled"] is not None:
        flags = ", ".join(data["throttled"]["flags"]) or "none"
        print(f"throttled  {data['throttled']['raw']:<40} {flags}")
    for row in data["unavailable"]:
        print(f"missing    {row['sensor']:<40} {row['reason']}")


def run(args: argparse.Namespace) -> int:
    from ..cli import UsageError

    if not (math.isfinite(args.interval) and 0 < args.interval <= MAX_INTERVAL_S):
        raise UsageError(
            f"--interval must be a number of seconds above 0 and at most {MAX_INTERVAL_S}, got {args.interval}"
        )
    if args.count < 0:
        raise UsageError(f"--count must be 0 (until Ctrl-C) or a number of readings, got {args.count}")
    if not os.path.isdir(args.root):
        raise UsageError(f"--root {args.root}: not a folder (it stands for / of the machine to read)")
    found = discover(args.root, vcgencmd=args.vcgencmd, tegrastats=args.tegrastats, serial_ports=args.serial)
    try:
        data = snapshot(found)
        if args.json and args.once:
            print(json.dumps(data, indent=2))
            return 0
        if not args.json:
            _print_snapshot(data)
        if args.once:
            return 0
        if found.total is None:
            print(f"edgeinf: error: no total power sensor to follow ({data['total_reason']})", file=sys.stderr)
            return 1
        return _live(found.total, args)
    finally:
        found.close()


def _live(total: PowerSensor, args) -> int:
    meter = EnergyMeter()
    readings = 0
    try:
        while not args.count or readings < args.count:
            row: dict[str, float | str]
            try:
                sample = total.read()
            except SensorError as exc:
                meter.gap()
                t_s = time.monotonic()
                row = {"t_s": t_s, "error": str(exc)}
                line = f"{t_s:.3f}  error: {exc}"
            else:
                meter.add(sample)
                t_s = round(sample.timestamp_s, 6)
                power_mw = round(sample.power_mw, 1)
                energy_j = round(meter.energy_uj / 1e6, 6)
                row = {"t_s": t_s, "power_mw": power_mw, "energy_j": energy_j}
                line = f"{t_s:.3f}  {power_mw / 1000:8.3f} W  {energy_j:10.3f} J"
            print(json.dumps(row) if args.json else line, flush=True)
            readings += 1
            if not args.count or readings < args.count:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0
