"""Run conditions (governor, clocks, temperature, firmware flags) from fake sysfs trees and vcgencmd output."""

from __future__ import annotations

import json
import subprocess

from test_board import PI5_FEATURES, arm_cpuinfo, make_root

from edgeinf import board


def pi5_tree(tmp_path, *, governor="performance", cur=2400000, limit=2400000, temp_mc=52150):
    root = make_root(tmp_path, model="Raspberry Pi 5 Model B Rev 1.0", cpuinfo=arm_cpuinfo("0xd0b", PI5_FEATURES))
    policy = root / "sys/devices/system/cpu/cpufreq/policy0"
    policy.mkdir(parents=True)
    for name, value in {
        "scaling_governor": governor,
        "scaling_cur_freq": cur,
        "scaling_max_freq": limit,
        "scaling_min_freq": 1500000,
        "cpuinfo_max_freq": 2400000,
        "cpuinfo_min_freq": 1500000,
        "affected_cpus": "0 1 2 3",
    }.items():
        (policy / name).write_text(f"{value}\n")
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("cpu-thermal\n")
    (zone / "temp").write_text(f"{temp_mc}\n")
    return root


def vcgencmd(output: str):
    def run(command, **kwargs):
        assert command[1:] == ["get_throttled"]
        return subprocess.CompletedProcess(command, 0, stdout=output, stderr="")

    return run


def test_a_cool_pi5_at_full_clock_reports_nothing_slowing_it(tmp_path):
    cond = board.conditions(pi5_tree(tmp_path), runner=vcgencmd("throttled=0x0\n"), environ={})
    assert cond["cpu"] == "Cortex-A76"
    assert cond["governors"] == ["performance"]
    assert cond["clock_mhz"] == {"current": [2400.0], "max": [2400.0], "hardware_max": [2400.0]}
    assert cond["temperature_c"] == 52.15
    assert cond["throttled"] == {"raw": "0x0", "flags": []}
    assert cond["warnings"] == []
    assert "nothing slowing the run" in board.conditions_summary(cond)
    json.dumps(cond)  # JSON-ready, as bench and info write it


def test_throttling_under_voltage_heat_governor_and_cap_are_each_named(tmp_path):
    root = pi5_tree(tmp_path, governor="ondemand", cur=1500000, limit=2000000, temp_mc=84300)
    cond = board.conditions(root, runner=vcgencmd("throttled=0x50005\n"), environ={})
    text = " | ".join(cond["warnings"])
    assert "governor 'ondemand'" in text
    assert "capped at 2000 of 2400 MHz" in text
    assert "84 °C" in text
    assert "under voltage, throttled now" in text
    assert cond["throttled"]["flags"] == ["under_voltage", "throttled", "under_voltage_occurred", "throttled_occurred"]
    summary = board.conditions_summary(cond)
    assert "clock 1500 of 2400 MHz" in summary and "throttled=0x50005" in summary


def test_past_throttling_only_is_reported_as_since_boot(tmp_path):
    cond = board.conditions(pi5_tree(tmp_path), runner=vcgencmd("throttled=0x80000\n"), environ={})
    assert cond["warnings"] == ["since boot: soft temp limit occurred"]


def test_garbage_from_vcgencmd_and_bad_sysfs_values_are_reported_not_raised(tmp_path):
    root = pi5_tree(tmp_path)
    (root / "sys/class/thermal/thermal_zone0/temp").write_text("garbage\n")
    (root / "sys/devices/system/cpu/cpufreq/policy0/scaling_cur_freq").write_text("<unknown>\n")
    cond = board.conditions(root, runner=vcgencmd('error=1 error_msg="no"\n'), environ={})
    assert cond["temperature_c"] is None
    assert cond["clock_mhz"]["current"] == [None]
    assert "expected 'throttled=0x...'" in cond["throttled"]["error"]


def test_a_machine_without_sysfs_or_vcgencmd_gives_empty_readings(tmp_path):
    cond = board.conditions(tmp_path, vcgencmd=None, environ={"QEMU_CPU": "cortex-a76"})
    assert cond["governors"] == [] and cond["temperature_c"] is None and cond["throttled"] is None
    assert cond["warnings"] == ["emulated under qemu: timings say nothing about the board"]


def test_edgeinf_info_and_bench_records_carry_the_conditions(model_path, capsys):
    from edgeinf import bench
    from edgeinf.bench.cli import to_table
    from edgeinf.cli import main

    here = board.conditions()
    assert main(["info", str(model_path("face_detection_short_range")), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert set(facts["conditions"]) == set(here) and facts["conditions"]["cpu"] == here["cpu"]
    assert main(["info", str(model_path("face_detection_short_range"))]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("conditions ")]
    assert line and line[0].split(None, 1)[1].startswith(board.conditions_summary(here).split(";")[0].split(",")[0])
    document = {"results": [], "skipped": [], **bench.environment()}
    assert set(document["machine"]["conditions"]) == set(here)
    assert "conditions: " in to_table(document)
