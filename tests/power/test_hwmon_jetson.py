"""hwmon INA2xx, mainline INA3221 (JetPack 5+), ina3221x IIO (JetPack 4) and board totals."""

from __future__ import annotations

import errno

import pytest

from edgeinf.errors import SensorError
from edgeinf.power import discover
from edgeinf.power.sensors import Sysfs, choose_total, hwmon_power_sensors, iio_rails, jetson_rails, jetson_total

from .conftest import failing_opener, ina3221_files

ORIN_NX = [("VDD_IN", 5080, 1200), ("VDD_CPU_GPU_CV", 5072, 310), ("VDD_SOC", 5076, 290)]
ORIN_DEVICE = "platform/bus@0/c240000.i2c/i2c-1/1-0040"


def test_ina219_power_is_microwatts_found_by_name_not_number(fake_sys):
    for number in (0, 5):  # a different hwmon number after each "boot"
        root = fake_sys.root.parent / f"boot{number}"
        tree = type(fake_sys)(root)
        tree.hwmon(2, "virtual/thermal/thermal_zone0", {"name": "cpu_thermal", "temp1_input": 45000})
        tree.hwmon(
            number + 3,
            "platform/soc/i2c-1/1-0045",
            {"name": "ina219", "power1_input": 2_345_000, "in1_input": 5012, "in0_input": 11, "curr1_input": 468},
        )
        sensors = hwmon_power_sensors(Sysfs(root))
        assert [s.name for s in sensors] == ["ina219:power1"]
        sample = sensors[0].read()
        assert sample.power_mw == pytest.approx(2345.0)
        assert sample.voltage_mv == 5012.0  # bus voltage (in1), not the shunt drop (in0)
        assert sample.current_ma == 468.0


def test_ina3221_hwmon_power_is_voltage_times_current_and_total_is_vdd_in_only(fake_sys):
    fake_sys.hwmon(1, ORIN_DEVICE, ina3221_files(ORIN_NX), driver="ina3221")
    rails = jetson_rails(Sysfs(fake_sys.root))
    assert [r.name for r in rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]  # no shunt-sum channel
    powers = {r.name: r.read().power_mw for r in rails}
    assert powers["VDD_IN"] == pytest.approx(5080 * 1200 / 1000)
    assert powers["VDD_SOC"] == pytest.approx(5076 * 290 / 1000)
    total = jetson_total(rails)
    assert total.rule.rails == ("VDD_IN",)
    # the sub-rails are inside VDD_IN: adding them would double count
    assert total.read().power_mw == pytest.approx(powers["VDD_IN"])


def test_agx_orin_sums_compute_rails_and_skips_nc_and_the_5v_io_rail(fake_sys):
    fake_sys.ina3221(1, "0040", [("VDD_GPU_SOC", 5000, 900), ("VDD_CPU_CV", 5000, 700), ("VIN_SYS_5V0", 5000, 400)])
    fake_sys.ina3221(2, "0041", [("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 5000, 120), ("NC", 0, 0)])
    rails = jetson_rails(Sysfs(fake_sys.root))
    assert sorted(r.name for r in rails) == ["VDDQ_VDD2_1V8AO", "VDD_CPU_CV", "VDD_GPU_SOC", "VIN_SYS_5V0"]
    total = jetson_total(rails)
    assert total.rule.board == "AGX Orin"
    assert total.read().power_mw == pytest.approx(5000 * (900 + 700) / 1000)


def test_hwmon_rails_are_listed_once_though_reachable_by_class_and_driver_links(fake_sys):
    fake_sys.hwmon(4, ORIN_DEVICE, ina3221_files(ORIN_NX), driver="ina3221")
    assert len(jetson_rails(Sysfs(fake_sys.root))) == 3
    # the driver link leads to the same directory as the class link
    assert (fake_sys.root / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon4/in1_label").read_text().strip() == "VDD_IN"


def test_disabled_ina3221_channel_reports_enodata_as_sensor_error(fake_sys):
    device = fake_sys.hwmon(1, ORIN_DEVICE, ina3221_files(ORIN_NX))
    opener = failing_opener(device / "curr3_input", OSError(errno.ENODATA, "No data available"))
    rails = jetson_rails(Sysfs(fake_sys.root, opener))
    with pytest.raises(SensorError, match="no data"):
        rails[2].read()
    assert rails[0].read().power_mw > 0  # other channels unaffected


def _jp4(tree, device, rails):
    directory = f"sys/devices/7000c400.i2c/i2c-1/{device}/iio:device0"
    for k, (name, mw, mv, ma) in enumerate(rails):
        tree.write(f"{directory}/rail_name_{k}", name)
        tree.write(f"{directory}/in_power{k}_input", mw)
        tree.write(f"{directory}/in_voltage{k}_input", mv)
        tree.write(f"{directory}/in_current{k}_input", ma)
        tree.write(f"{directory}/crit_current_limit_{k}", 5000)
    tree.link(f"sys/bus/i2c/drivers/ina3221x/{device}", f"sys/devices/7000c400.i2c/i2c-1/{device}")


def test_jetpack4_nano_iio_rails_in_milliwatts_total_is_pom_5v_in(fake_sys):
    _jp4(
        fake_sys,
        "6-0040",
        [("POM_5V_IN", 4122, 5000, 824), ("POM_5V_GPU", 109, 5000, 21), ("POM_5V_CPU", 1167, 5000, 233)],
    )
    rails = iio_rails(Sysfs(fake_sys.root))
    assert [r.name for r in rails] == ["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"]
    assert rails[1].read().power_mw == 109.0
    assert rails[1].read().current_ma == 21.0
    total = jetson_total(rails)
    assert (total.rule.board, total.read().power_mw) == ("Nano", 4122.0)


def test_jetpack4_agx_xavier_sums_its_six_rails(fake_sys):
    _jp4(fake_sys, "1-0040", [("GPU", 1000, 19000, 52), ("CPU", 2000, 19000, 105), ("SOC", 3000, 19000, 158)])
    _jp4(fake_sys, "1-0041", [("CV", 400, 19000, 21), ("VDDRQ", 500, 19000, 26), ("SYS5V", 600, 5000, 120)])
    total = jetson_total(iio_rails(Sysfs(fake_sys.root)))
    assert total.rule.board == "AGX Xavier"
    assert total.read().power_mw == 7500.0


@pytest.mark.parametrize(
    "rails, expected",
    [
        (["VDD_IN", "VDD_SYS_CPU", "VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_SYS_DDR", "VDD_4V0_WIFI"], ("VDD_IN",)),
        (["VIN"], ("VIN",)),
        (["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"], ("VDD_GPU_SOC", "VDD_CPU_CV")),
        (["CPU", "GPU"], None),  # partial Xavier set: no rule, so nothing is summed by guess
    ],
)
def test_choose_total_per_board(rails, expected):
    rule = choose_total(rails)
    assert (rule.rails if rule else None) == expected


def test_sensor_vanishing_raises_then_discovery_no_longer_lists_it(fake_sys):
    device = fake_sys.hwmon(3, "platform/soc/i2c-1/1-0045", {"name": "ina226", "power1_input": 1_000_000})
    found = discover(fake_sys.root, vcgencmd=None)
    assert found.total.name == "ina226:power1"
    for file in device.iterdir():
        file.unlink()
    device.rmdir()
    with pytest.raises(SensorError, match="gone"):
        found.total.read()
    again = discover(fake_sys.root, vcgencmd=None)
    assert again.total is None and again.power == []


@pytest.mark.parametrize("garbage", ["", "abc", "12x4", "\x00\xff\x10"])
def test_garbage_in_a_sysfs_file_is_a_sensor_error(fake_sys, garbage):
    device = fake_sys.hwmon(0, "platform/i2c/1-0040", {"name": "ina219", "power1_input": 5})
    (device / "power1_input").write_bytes(garbage.encode("latin-1"))
    with pytest.raises(SensorError, match="expected an integer"):
        hwmon_power_sensors(Sysfs(fake_sys.root))[0].read()


def test_negative_or_absurd_power_is_rejected(fake_sys):
    device = fake_sys.hwmon(0, "platform/i2c/1-0040", {"name": "ina219", "power1_input": -5})
    sensor = hwmon_power_sensors(Sysfs(fake_sys.root))[0]
    with pytest.raises(SensorError, match="implausible"):
        sensor.read()
    (device / "power1_input").write_text("99999999999999\n")
    with pytest.raises(SensorError, match="implausible"):
        sensor.read()


def test_permission_denied_on_a_rail_is_a_sensor_error_naming_the_file(fake_sys):
    device = fake_sys.hwmon(1, ORIN_DEVICE, ina3221_files(ORIN_NX))
    bad = device / "in1_input"
    rails = jetson_rails(Sysfs(fake_sys.root, failing_opener(bad, PermissionError(13, "Permission denied"))))
    with pytest.raises(SensorError, match="permission denied") as info:
        jetson_total(rails).read()
    assert str(bad) in str(info.value)
