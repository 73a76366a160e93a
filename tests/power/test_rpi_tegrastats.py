"""Pi 5 PMIC and get_throttled through a stub vcgencmd; tegrastats lines and a stub tegrastats."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from edgeinf.errors import SensorError
from edgeinf.power import discover
from edgeinf.power.sensors import PiPmicSensor, TegrastatsSensor, parse_pmic_read_adc, parse_tegrastats, read_throttled

from .conftest import make_stub

DATA = Path(__file__).parent / "data"

# (amps, volts) of the rails of the recorded dump that have both, as printed by the firmware.
PI5_RAILS = {
    "3V7_WL_SW": (0.09368929, 3.69977600),
    "3V3_SYS": (0.08783370, 3.30136200),
    "1V8_SYS": (0.18054710, 1.79950800),
    "DDR_VDD2": (0.22543980, 1.11135200),
    "DDR_VDDQ": (0.06666720, 0.60658800),
    "1V1_SYS": (0.17566740, 1.10598400),
    "0V8_SW": (0.37670900, 0.80195200),
    "VDD_CORE": (6.22421000, 0.86173300),
    "3V3_DAC": (0.00006105, 3.30402000),
    "3V3_ADC": (0.00036630, 3.30768300),
    "0V8_AON": (0.00305250, 0.80097600),
    "HDMI": (0.02417580, 5.08664000),
}


@pytest.fixture
def vcgencmd(tmp_path):
    """A stub vcgencmd replaying the recorded Pi 5 output; it logs each spawn to calls.log."""
    log = tmp_path / "calls.log"
    script = f"""echo "$@" >> {log}
case "$1" in
  pmic_read_adc) cat {DATA / "pmic_read_adc_pi5.txt"} ;;
  get_throttled) echo "throttled=0x50005" ;;
  *) echo 'error=1 error_msg="Command not registered"' ;;
esac
"""
    return make_stub(tmp_path / "bin", "vcgencmd", script), log


def test_pmic_rails_paired_by_name_and_summed(vcgencmd):
    stub, _ = vcgencmd
    rails = parse_pmic_read_adc((DATA / "pmic_read_adc_pi5.txt").read_text())
    assert rails["VDD_CORE"].current_ma == pytest.approx(6224.21)
    assert rails["VDD_CORE"].voltage_mv == pytest.approx(861.733)
    assert rails["EXT5V"].current_ma is None and rails["EXT5V"].power_mw is None  # voltage only
    assert rails["BATT"].voltage_mv is None  # "nanV"
    expected_mw = sum(a * v for a, v in PI5_RAILS.values()) * 1000
    sample = PiPmicSensor(str(stub)).read()
    assert sample.power_mw == pytest.approx(expected_mw, rel=1e-9)
    assert 7200 < sample.power_mw < 7300  # VDD_CORE (5.36 W) dominates


def test_pmic_is_not_spawned_more_often_than_min_interval(vcgencmd):
    stub, log = vcgencmd
    now = [0.0]
    sensor = PiPmicSensor(str(stub), clock=lambda: now[0], min_interval_s=0.125)
    samples = []
    for _ in range(10):  # 10 reads, one per 62.5 ms of (fake) time: binary-exact steps
        samples.append(sensor.read())
        now[0] += 0.0625
    assert sensor.spawns == 5
    assert len(log.read_text().splitlines()) == 5
    assert samples[1] is samples[0]


def test_pmic_missing_on_board_is_an_error_not_a_crash(tmp_path):
    stub = make_stub(tmp_path / "bin", "vcgencmd", "echo 'error=1 error_msg=\"Command not registered\"'\n")
    with pytest.raises(SensorError, match="Command not registered"):
        PiPmicSensor(str(stub)).read()
    found = discover(tmp_path / "empty", vcgencmd=str(stub))
    assert found.total is None
    assert found.unavailable[0][0] == "rpi5-pmic"


def test_pmic_garbage_output_and_failing_command(tmp_path):
    garbage = make_stub(tmp_path / "g", "vcgencmd", "printf '\\377\\376 garbage\\n'\n")
    with pytest.raises(SensorError, match="no rail lines"):
        PiPmicSensor(str(garbage)).read()
    failing = make_stub(tmp_path / "f", "vcgencmd", "echo 'VCHI initialization failed' >&2; exit 255\n")
    with pytest.raises(SensorError, match="exited with 255: VCHI initialization failed"):
        PiPmicSensor(str(failing)).read()
    with pytest.raises(SensorError, match="command not found"):
        PiPmicSensor(str(tmp_path / "absent")).read()


def test_pmic_permission_denied_names_the_video_group(vcgencmd):
    def runner(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    with pytest.raises(SensorError, match="video"):
        PiPmicSensor(str(vcgencmd[0]), runner=runner).read()


def test_discover_picks_the_pmic_on_a_pi5(vcgencmd, tmp_path):
    found = discover(tmp_path / "root", vcgencmd=str(vcgencmd[0]))
    assert found.total.name == "rpi5-pmic"
    assert "not the USB-C input" in found.total_reason
    assert found.throttled.raw == 0x50005 and found.throttled.under_voltage


def test_get_throttled_flags(vcgencmd):
    flags = read_throttled(str(vcgencmd[0]))
    assert flags.raw == 0x50005
    assert flags.under_voltage and flags.throttled and not flags.freq_capped
    assert flags.under_voltage_occurred and flags.throttled_occurred and not flags.soft_temp_limit_occurred
    assert flags.active() == ["under_voltage", "throttled", "under_voltage_occurred", "throttled_occurred"]


def test_tegrastats_jetpack4_nano_line():
    line = parse_tegrastats((DATA / "tegrastats_nano_jp4.txt").read_text().splitlines()[0])
    assert line.rails_mw == {"POM_5V_IN": (4122, 3107), "POM_5V_GPU": (109, 85), "POM_5V_CPU": (1167, 748)}
    assert line.temps_mc["CPU"] == 44000 and line.temps_mc["GPU"] == 38500 and line.temps_mc["thermal"] == 41250
    assert line.total_mw() == 4122.0  # POM_5V_IN alone; GPU and CPU are inside it


def test_tegrastats_jetpack5_orin_line_with_mw_units():
    line = parse_tegrastats((DATA / "tegrastats_orin_jp5.txt").read_text().splitlines()[1])
    assert line.rails_mw == {"VDD_IN": (7120, 5521), "VDD_CPU_GPU_CV": (2980, 1790), "VDD_SOC": (1610, 1424)}
    assert line.temps_mc["tj"] == 63125
    assert line.total_mw() == 7120.0


def test_tegrastats_line_without_known_total_raises():
    with pytest.raises(SensorError, match="no board-total rule"):
        parse_tegrastats("RAM 1/2MB VDD_FOO 100mW/100mW").total_mw()


def _tegrastats_stub(tmp_path, data: Path, forever: bool):
    loop = "while true; do" if forever else "for i in 1; do"
    script = f"""{loop}
  while IFS= read -r line; do echo "$line"; sleep 0.02; done < {data}
done
"""
    return make_stub(tmp_path / "bin", "tegrastats", script)


def test_tegrastats_stub_process_reports_board_total(tmp_path):
    stub = _tegrastats_stub(tmp_path, DATA / "tegrastats_orin_jp5.txt", forever=True)
    sensor = TegrastatsSensor(str(stub), interval_ms=20)
    try:
        seen = set()
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.add(sensor.read().power_mw)
            time.sleep(0.005)
        assert seen == {3913.0, 7120.0}
    finally:
        sensor.close()


def test_tegrastats_that_exits_becomes_stale(tmp_path):
    stub = _tegrastats_stub(tmp_path, DATA / "tegrastats_nano_jp4.txt", forever=False)
    now = [0.0]
    sensor = TegrastatsSensor(str(stub), interval_ms=100, clock=lambda: now[0])
    try:
        assert sensor.read().power_mw in (4122.0, 4300.0)
        now[0] += 10.0
        with pytest.raises(SensorError, match="last line 10.0 s ago"):
            sensor.read()
    finally:
        sensor.close()


def test_tegrastats_missing_executable(tmp_path):
    with pytest.raises(SensorError, match="cannot start"):
        TegrastatsSensor(str(tmp_path / "nope")).read()
