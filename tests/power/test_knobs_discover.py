"""cpufreq and thermal-limit knobs on a fake tree with kernel-like write rules; discovery order."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import pytest

from edgeinf.errors import SensorError
from edgeinf.power import ThermalLimit, cpufreq_policies, discover
from edgeinf.power.sensors import Sysfs

POLICY = "sys/devices/system/cpu/cpufreq/policy0"
TABLE = (600_000, 1_000_000, 1_500_000, 1_800_000, 2_400_000)


def pi5_cpufreq(tree):
    files = {
        "scaling_governor": "ondemand",
        "scaling_available_governors": "conservative ondemand userspace powersave performance schedutil",
        "scaling_min_freq": 600_000,
        "scaling_max_freq": 2_400_000,
        "scaling_cur_freq": 1_500_000,
        "cpuinfo_min_freq": 600_000,
        "cpuinfo_max_freq": 2_400_000,
        "scaling_available_frequencies": " ".join(str(f) for f in TABLE),
        "affected_cpus": "0 1 2 3",
        "scaling_driver": "cpufreq-dt",
    }
    for name, value in files.items():
        tree.write(f"{POLICY}/{name}", value)
    for cpu in range(4):
        tree.link(f"sys/devices/system/cpu/cpu{cpu}/cpufreq", POLICY)


class KernelWrites:
    """An ``open`` whose writes follow cpufreq's rules: EINVAL for text that is not a number or a
    known governor, frequencies clamped to the hardware range; optionally EACCES for all writes."""

    def __init__(self, root: Path, deny=False):
        self.root = root
        self.deny = deny
        self.writes = []

    def __call__(self, path, mode="r", **kwargs):
        if "w" not in mode and "+" not in mode:
            return open(path, mode, **kwargs)
        if self.deny:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        if "+" in mode:
            return open(path, mode, **kwargs)
        return _KernelFile(self, Path(path))


class _KernelFile(io.StringIO):
    def __init__(self, kernel, path):
        super().__init__()
        self.kernel = kernel
        self.path = path

    def close(self):
        value = self.getvalue().strip()
        policy = self.path.parent
        if self.path.name == "scaling_governor":
            if value not in (policy / "scaling_available_governors").read_text().split():
                raise OSError(errno.EINVAL, "Invalid argument")
        elif self.path.name in ("scaling_max_freq", "scaling_min_freq"):
            if not value.isdigit():
                raise OSError(errno.EINVAL, "Invalid argument")
            low = int((policy / "cpuinfo_min_freq").read_text())
            high = int((policy / "cpuinfo_max_freq").read_text())
            value = str(min(max(int(value), low), high))
        self.kernel.writes.append((self.path.name, value))
        self.path.write_text(value + "\n")
        super().close()


def test_cpufreq_reads_policy_and_caps_to_a_table_frequency(fake_sys):
    pi5_cpufreq(fake_sys)
    kernel = KernelWrites(fake_sys.root)
    (policy,) = cpufreq_policies(fake_sys.root, opener=kernel)
    assert policy.describe() == {
        "policy": "policy0",
        "governor": "ondemand",
        "min_khz": 600_000,
        "max_khz": 2_400_000,
        "hardware_range_khz": [600_000, 2_400_000],
        "available_khz": list(TABLE),
        "writable": True,
    }
    assert policy.cpus == (0, 1, 2, 3)
    assert policy.set_max_khz(2_000_000) == 1_800_000  # snapped down to the table
    assert policy.set_max_khz(100_000) == 600_000  # clamped to the hardware minimum
    policy.set_governor("powersave")
    assert (policy.governor, policy.max_khz) == ("powersave", 600_000)
    policy.restore()
    assert (policy.governor, policy.max_khz) == ("ondemand", 2_400_000)


def test_cpufreq_without_a_table_uses_the_clamped_request(fake_sys):
    pi5_cpufreq(fake_sys)
    (fake_sys.root / POLICY / "scaling_available_frequencies").unlink()  # intel_pstate has no table
    (policy,) = cpufreq_policies(fake_sys.root, opener=KernelWrites(fake_sys.root))
    assert policy.available_khz == ()
    assert policy.set_max_khz(1_234_567) == 1_234_567


def test_cpufreq_bad_requests(fake_sys):
    pi5_cpufreq(fake_sys)
    (policy,) = cpufreq_policies(fake_sys.root, opener=KernelWrites(fake_sys.root))
    with pytest.raises(ValueError, match=r"governor 'turbo' not available; expected one of \('conservative'"):
        policy.set_governor("turbo")
    with pytest.raises(ValueError, match="expected a positive frequency in kHz, got -5"):
        policy.set_max_khz(-5)
    with pytest.raises(ValueError, match="got 1.5"):
        policy.set_max_khz(1.5)


def test_cpufreq_read_only_tree_is_reported_and_never_written(fake_sys):
    pi5_cpufreq(fake_sys)
    kernel = KernelWrites(fake_sys.root, deny=True)
    (policy,) = cpufreq_policies(fake_sys.root, opener=kernel)
    assert policy.writable is False
    with pytest.raises(SensorError, match="permission denied writing '1800000'"):
        policy.set_max_khz(1_800_000)
    assert (fake_sys.root / POLICY / "scaling_max_freq").read_text().strip() == "2400000"


def test_kernel_rejection_is_a_clear_error(fake_sys):
    pi5_cpufreq(fake_sys)
    policy = cpufreq_policies(Sysfs(fake_sys.root, KernelWrites(fake_sys.root)))[0]
    with pytest.raises(SensorError, match="kernel rejected 'fast'"):
        policy.sysfs.write_text(policy.directory / "scaling_max_freq", "fast")


def test_no_cpufreq_is_an_empty_list(tmp_path):
    assert cpufreq_policies(tmp_path) == []


def test_thermal_limit_holds_a_margin_below_the_trip():
    assert ThermalLimit().hold_mc == 77_000
    assert ThermalLimit(trip_mc=85_000, margin_mc=5_000).hold_mc == 80_000
    with pytest.raises(ValueError, match="margin_mc must be >= 0, got -1"):
        ThermalLimit(margin_mc=-1)


def test_discover_prefers_the_board_total_over_parts_and_rapl(fake_sys):
    fake_sys.ina3221(1, "0040", [("VDD_IN", 5000, 1000), ("VDD_CPU_GPU_CV", 5000, 300), ("VDD_SOC", 5000, 200)])
    fake_sys.thermal_zone(0, "cpu-thermal", 51000)
    fake_sys.rapl_zone("package-0", max_energy_range_uj=1000, energy_uj=5)
    fake_sys.write("sys/class/power_supply/BAT0/type", "Battery")
    fake_sys.write("sys/class/power_supply/BAT0/power_now", 4_000_000)
    pi5_cpufreq(fake_sys)
    found = discover(fake_sys.root, vcgencmd=None)
    assert found.total.name.startswith("jetson-total (TX2 / Xavier NX / Orin NX / Orin Nano: VDD_IN)")
    assert found.total.read().power_mw == 5000.0
    assert {s.name for s in found.power} >= {"VDD_IN", "VDD_SOC", "battery:BAT0", "rapl:package-0"}
    assert [z.name for z in found.thermal] == ["cpu-thermal"]
    assert [p.name for p in found.cpufreq] == ["policy0"]
    assert found.sensor("VDD_SOC").read().power_mw == 1000.0
    with pytest.raises(SensorError, match="no power sensor named 'VDD_GPU'"):
        found.sensor("VDD_GPU")


def test_discover_on_an_empty_tree_is_empty_not_an_error(tmp_path):
    found = discover(tmp_path, vcgencmd=None)
    assert (found.total, found.power, found.thermal, found.cpufreq, found.unavailable) == (None, [], [], [], [])
    assert found.total_reason == "no power sensor found"


def test_discover_lists_an_unreadable_serial_meter_with_its_reason(tmp_path):
    pytest.importorskip("serial")
    found = discover(tmp_path, vcgencmd=None, serial_ports=[str(tmp_path / "rfcomm0")])
    assert found.total is None
    assert "cannot open serial port" in found.unavailable[0][1]
    with pytest.raises(ValueError, match="'um' or 'line'"):
        discover(tmp_path, vcgencmd=None, serial_ports=["/dev/x@modbus"])


def test_frequency_knob_applies_decision_caps_once(fake_sys):
    from edgeinf.power.knobs import FrequencyKnob

    pi5_cpufreq(fake_sys)
    kernel = KernelWrites(fake_sys.root)
    knob = FrequencyKnob(cpufreq_policies(fake_sys.root, opener=kernel))
    assert knob.apply(1_500_000) == 1_500_000
    assert knob.apply(1_500_000) == 1_500_000  # unchanged: not written again
    assert knob.apply(None) == 1_500_000  # a configuration without a cap leaves the clock alone
    assert [w for w in kernel.writes if w[0] == "scaling_max_freq"] == [("scaling_max_freq", "1500000")]
    knob.restore()
    assert (fake_sys.root / POLICY / "scaling_max_freq").read_text().strip() == "2400000"
    read_only = FrequencyKnob(cpufreq_policies(fake_sys.root, opener=KernelWrites(fake_sys.root, deny=True)))
    assert read_only.apply(1_000_000) is None
