"""Fake sysfs trees laid out as the real drivers do, and stub executables.

Every tree lives under pytest's tmp_path; hwmon devices sit under ``sys/devices`` and
are reached through ``sys/class/hwmon/hwmonN`` symlinks (and driver symlinks), as on a
real kernel, so readers that resolve or glob paths are exercised as on a device.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest


class FakeSys:
    """Builds a sysfs-like tree below ``root``."""

    def __init__(self, root: Path):
        self.root = root

    def write(self, relative: str, content) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{content}\n")
        return path

    def link(self, link_relative: str, target_relative: str) -> None:
        link = self.root / link_relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(self.root / target_relative, link.parent))

    def hwmon(self, number: int, device: str, files: dict, driver: str | None = None) -> Path:
        """A hwmon device at sys/devices/<device>/hwmon/hwmon<number> with a class symlink."""
        directory = f"sys/devices/{device}/hwmon/hwmon{number}"
        for name, value in files.items():
            self.write(f"{directory}/{name}", value)
        self.link(f"sys/class/hwmon/hwmon{number}", directory)
        if driver:
            self.link(f"sys/bus/i2c/drivers/{driver}/{Path(device).name}", f"sys/devices/{device}")
        return self.root / directory

    def ina3221(self, number: int, address: str, channels) -> Path:
        """An ina3221 on I2C bus 1 at ``address`` (``"0040"``), as the Jetson boards have them;
        channels as `ina3221_files`."""
        return self.hwmon(number, f"platform/i2c-1/1-{address}", ina3221_files(channels), driver="ina3221")

    def thermal_zone(self, index: int, kind: str, temp_mc: int) -> None:
        """sys/class/thermal/thermal_zone<index> of type ``kind`` at ``temp_mc``."""
        self.write(f"sys/class/thermal/thermal_zone{index}/type", kind)
        self.write(f"sys/class/thermal/thermal_zone{index}/temp", temp_mc)

    def rapl_zone(self, name: str, max_energy_range_uj: int, energy_uj: int | None = None) -> None:
        """sys/class/powercap/intel-rapl:0 named ``name``; without ``energy_uj`` its counter is missing."""
        self.write("sys/class/powercap/intel-rapl:0/name", name)
        if energy_uj is not None:
            self.write("sys/class/powercap/intel-rapl:0/energy_uj", energy_uj)
        self.write("sys/class/powercap/intel-rapl:0/max_energy_range_uj", max_energy_range_uj)


@pytest.fixture
def fake_sys(tmp_path) -> FakeSys:
    return FakeSys(tmp_path / "root")


def ina3221_files(channels, shunt_sum_uv=1234) -> dict:
    """hwmon files of a mainline ina3221: channels = [(label, mV, mA)], 'NC' for unconnected."""
    files = {"name": "ina3221", "in7_label": "sum of shunt voltages", "in7_input": shunt_sum_uv, "samples": 512}
    for n, (label, mv, ma) in enumerate(channels, start=1):
        files[f"in{n}_label"] = label
        files[f"in{n}_input"] = mv
        files[f"curr{n}_input"] = ma
        files[f"in{n + 3}_input"] = ma * 5  # shunt microvolts across a 5 mOhm resistor
        files[f"shunt{n}_resistor"] = 5000
        files[f"curr{n}_crit"] = 10000
        files[f"curr{n}_max"] = 8000
        files[f"curr{n}_crit_alarm"] = 0
        files[f"curr{n}_max_alarm"] = 0
    files["curr4_input"] = sum(ma for _, _, ma in channels)
    return files


def failing_opener(bad_path: Path, error: OSError):
    """An ``open`` that raises ``error`` for one path (tests run as root, so chmod cannot)."""

    def opener(path, *args, **kwargs):
        if Path(path) == bad_path:
            raise error
        return open(path, *args, **kwargs)

    return opener


def permission_denied(path: Path) -> PermissionError:
    return PermissionError(errno.EACCES, "Permission denied", str(path))


def make_stub(directory: Path, name: str, script: str) -> Path:
    """A small executable shell script (a stand-in for vcgencmd, tegrastats, ...)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
