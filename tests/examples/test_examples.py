"""Every example, run in the mode that needs no camera and no board: real models, the real photo, fake sysfs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import edgeinf

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REPO = EXAMPLES.parent


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pi_loop():
    return load_example("pi_camera_loop")


@pytest.fixture(scope="module")
def jetson():
    return load_example("jetson_rails")


# -- Raspberry Pi camera loop ---------------------------------------------------------------------


def test_camera_loop_under_the_power_scheduler(pi_loop, capsys, tmp_path):
    code = pi_loop.main(["--source", "auto", "--frames", "10", "--fps", "40", "--json", "--power-root", str(tmp_path)])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["source"].startswith("images in ")  # no picamera2, no camera: the folder fallback
    assert summary["policy"] == "scheduler" and summary["power_sensor"] == "none found"
    assert summary["profile_estimated"] is True  # no sensor: energy estimated from CPU time
    assert set(summary["profile"]) == {"face_detection_full_range", "face_detection_short_range"}
    assert summary["frames"] == 10 and summary["processed"] + summary["dropped"] == 10
    assert summary["processed"] >= 1 and summary["scheduler"]["served"] == summary["processed"]
    assert sum(summary["variants_used"].values()) == summary["processed"]
    assert summary["frames_with_faces"] == summary["processed"]  # Grace Hopper's face, found by either variant


def test_camera_loop_duty_policy_holds_the_average(pi_loop, capsys, tmp_path):
    args = ["--source", "auto", "--frames", "4", "--fps", "100", "--json", "--power-root", str(tmp_path)]
    code = pi_loop.main([*args, "--policy", "duty", "--variants", "face_detection_short_range"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["policy"] == "duty"
    assert summary["processed"] == 4 and summary["frames_with_faces"] == 4 and summary["dropped"] == 0
    assert summary["duty"] == pytest.approx((3000 - 2000) / (5000 - 2000))
    assert summary["average_mw_estimated"] == pytest.approx(3000.0)  # rests exactly enough


def test_camera_loop_closes_the_loop_on_a_power_sensor(pi_loop, capsys, tmp_path):
    # A board whose only power sensor is an INA219 reading 4.5 W (hwmon power1_input is in µW).
    write(tmp_path / "sys/class/hwmon/hwmon2/name", "ina219")
    write(tmp_path / "sys/class/hwmon/hwmon2/power1_input", "4500000")
    args = ["--source", "folder", "--frames", "3", "--fps", "100", "--json", "--power-root", str(tmp_path)]
    code = pi_loop.main([*args, "--policy", "duty"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and "ina219" in summary["power_sensor"]
    # Each frame moves the active-power estimate a fifth of the way to the reading.
    assert summary["active_mw_estimate"] == pytest.approx(4500 + (5000 - 4500) * 0.8**3)
    assert summary["duty"] == pytest.approx((3000 - 2000) / (summary["active_mw_estimate"] - 2000))
    # The scheduler profiles with the same sensor: measured, not estimated.
    code = pi_loop.main([*args, "--policy", "scheduler", "--budget-mw", "6000"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["profile_estimated"] is False
    assert all(p["power_mw"] == pytest.approx(4500.0) for p in summary["profile"].values())


def test_camera_loop_on_a_folder_with_per_frame_lines(pi_loop, capsys, tmp_path, model_path):
    import shutil

    from PIL import Image

    shutil.copy(model_path("grace_hopper"), tmp_path / "a.jpg")
    Image.new("RGB", (320, 240), (90, 90, 90)).save(tmp_path / "b.png")  # a blank frame: no face
    (tmp_path / "notes.txt").write_text("not an image")
    args = ["--source", "folder", "--folder", str(tmp_path), "--frames", "4", "--fps", "100", "--budget-mw", "5000"]
    code = pi_loop.main([*args, "--policy", "duty", "--variants", "face_detection_short_range"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    frames = [line for line in out if line.startswith("frame")]
    assert [line.split()[3] for line in frames] == ["1", "0", "1", "0"]  # faces per frame, a.jpg then b.png
    assert "4 processed (2 with faces), 0 dropped" in out[-1]


def test_camera_loop_serves_metrics(pi_loop, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--source", "folder", "--frames", "2", "--fps", "100", "--quiet", "--policy", "duty"]
    assert pi_loop.main([*args, "--metrics-port", str(port)]) == 0


def test_camera_loop_refuses_an_empty_folder(pi_loop, tmp_path):
    from edgeinf.sources import SourceError

    with pytest.raises(SourceError, match="no images"):
        pi_loop.main(["--source", "folder", "--folder", str(tmp_path), "--frames", "1"])


class _FakePicamera2:
    """picamera2 at its package boundary: the calls the lores source makes, with real I420 frames
    of the manifest's portrait (at 640x480, padded rows as the Pi's ISP gives them)."""

    frame: np.ndarray  # the tight I420 frame, set by the test
    padding = 64
    configured: dict = {}

    def __init__(self, camera_num=0):
        self.config = None

    def create_video_configuration(self, main, lores):
        return {"main": main, "lores": lores}

    def configure(self, config):
        self.config = config
        _FakePicamera2.configured = config

    def stream_configuration(self, name):
        return {"stride": self.config[name]["size"][0] + self.padding}

    def start(self):
        pass

    def capture_array(self, name):
        import time

        time.sleep(0.005)  # the camera's pace
        width, height = self.config[name]["size"]
        stride = width + self.padding
        flat = np.zeros(height * 3 // 2 * stride, np.uint8)
        flat[: height * stride].reshape(height, stride)[:, :width] = self.frame[:height]
        chroma = self.frame[height:].reshape(height, width // 2)
        flat[height * stride :].reshape(height, stride // 2)[:, : width // 2] = chroma
        return flat.reshape(height * 3 // 2, stride)

    def stop(self):
        pass

    def close(self):
        pass


def test_camera_loop_on_the_pi_camera_lores_stream(pi_loop, capsys, tmp_path, monkeypatch, model_path):
    cv2 = pytest.importorskip("cv2")
    from PIL import Image

    with Image.open(model_path("grace_hopper")) as photo:
        rgb = np.asarray(photo.convert("RGB").resize((640, 480)))
    monkeypatch.setattr(_FakePicamera2, "frame", cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420), raising=False)
    monkeypatch.setitem(sys.modules, "picamera2", types.SimpleNamespace(Picamera2=_FakePicamera2))
    args = ["--source", "auto", "--frames", "3", "--json", "--power-root", str(tmp_path)]
    code = pi_loop.main([*args, "--policy", "duty", "--budget-mw", "5000", "--variants", "face_detection_short_range"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["source"] == "picamera2"  # auto picks the Pi camera when picamera2 imports
    assert _FakePicamera2.configured["lores"] == {"size": (640, 480), "format": "YUV420"}
    assert summary["processed"] == 3 and summary["frames_with_faces"] == 3  # the face, found in I420 frames


def test_duty_cycle_budget_holds_the_average(pi_loop):
    slept = []
    budget = pi_loop.DutyCycleBudget(3000, 2000, 5000, sleep=slept.append)
    assert budget.duty == pytest.approx(1 / 3)
    assert budget.frame_done(0.010) == pytest.approx(0.020)
    assert slept == [pytest.approx(0.020)]
    assert budget.average_mw == pytest.approx((5000 * 0.010 + 2000 * 0.020) / 0.030)
    # A sensor reading above the estimate raises the active power, so the loop rests longer.
    measured = pi_loop.DutyCycleBudget(3000, 2000, 5000, sensor=lambda: 6000.0, sleep=lambda s: None)
    rest = measured.frame_done(0.010)
    active = 0.8 * 5000 + 0.2 * 6000
    assert measured.active_mw == pytest.approx(active)
    assert rest == pytest.approx(0.010 * ((active - 2000) / (3000 - 2000) - 1))
    assert measured.average_mw == pytest.approx(3000.0)
    with pytest.raises(ValueError, match="must exceed the idle power"):
        pi_loop.DutyCycleBudget(1500, 2000, 5000)
    with pytest.raises(ValueError, match="idle power must be below active power"):
        pi_loop.DutyCycleBudget(3000, 5000, 2000)


# -- Jetson rails -------------------------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def orin_tree(tmp_path):
    """JetPack 5+ (mainline ina3221 hwmon) on an Orin Nano: mV and mA per channel, one NC, the shunt sum."""
    root = tmp_path / "orin"
    dev = root / "sys/class/hwmon/hwmon1"
    write(dev / "name", "ina3221")
    for n, (label, mv, ma) in enumerate([("VDD_IN", 5072, 1184), ("VDD_CPU_GPU_CV", 5064, 312), ("NC", 0, 0)], 1):
        write(dev / f"in{n}_label", label)
        write(dev / f"in{n}_input", str(mv))
        write(dev / f"curr{n}_input", str(ma))
    write(dev / "in7_label", "sum of shunt voltages")
    write(dev / "in7_input", "40")
    write(root / "sys/class/hwmon/hwmon0/name", "cpu_thermal")
    return root


@pytest.fixture
def nano_tree(tmp_path):
    """JetPack 4 (ina3221x IIO) on a Nano: milliwatts per rail; POM_5V_IN is the total."""
    root = tmp_path / "nano"
    dev = root / "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0"
    for n, (rail, mw) in enumerate([("POM_5V_IN", 3621), ("POM_5V_GPU", 80), ("POM_5V_CPU", 640)]):
        write(dev / f"rail_name_{n}", rail)
        write(dev / f"in_power{n}_input", str(mw))
    return root


def test_rails_of_both_driver_layouts(jetson, orin_tree, nano_tree):
    expected_orin = {"VDD_IN": 5072 * 1184 / 1000, "VDD_CPU_GPU_CV": 5064 * 312 / 1000}
    assert jetson.read_rails_builtin(orin_tree) == pytest.approx(expected_orin)
    rails, _ = jetson.read_rails(orin_tree)  # through edgeinf.power when installed: the same figures
    assert rails == pytest.approx(expected_orin)
    assert jetson.board_total_mw(rails) == (pytest.approx(5072 * 1184 / 1000), "VDD_IN")
    nano = jetson.read_rails_builtin(nano_tree)
    assert nano == {"POM_5V_IN": 3621.0, "POM_5V_GPU": 80.0, "POM_5V_CPU": 640.0}
    assert jetson.board_total_mw(nano) == (3621.0, "POM_5V_IN")
    assert jetson.board_total_mw({"GPU": 100.0, "CPU": 250.0}) == (350.0, "CPU + GPU")
    # AGX Orin has no input rail: compute is GPU_SOC + CPU_CV; the 5 V I/O rail is not part of it.
    orin_agx = {"VDD_GPU_SOC": 3000.0, "VDD_CPU_CV": 1500.0, "VIN_SYS_5V0": 2500.0}
    assert jetson.board_total_mw(orin_agx) == (4500.0, "VDD_GPU_SOC + VDD_CPU_CV")


def test_choice_follows_the_budget(jetson):
    latencies = {"full": 0.020, "short": 0.008}
    # 15 fps: full is busy 30 % (900 mW added), short 12 % (360 mW).
    roomy = jetson.choose(5000, 6000, 15, 3000, latencies)
    assert roomy["variant"] == "full" and roomy["fits"]
    tight = jetson.choose(5000, 5500, 15, 3000, latencies)
    assert tight["variant"] == "short" and tight["fits"]
    assert [e["estimated_mw"] for e in tight["estimates"]] == pytest.approx([5900, 5360])
    over = jetson.choose(5000, 5100, 15, 3000, latencies)
    assert over["variant"] == "short" and not over["fits"]
    assert over["fps"] == pytest.approx((100 / 3000) / 0.008)  # what the headroom affords
    too_fast = jetson.choose(5000, 1e9, 200, 3000, latencies)  # 200 fps: neither keeps up
    assert not too_fast["fits"]


def test_jetson_script_end_to_end_on_a_fake_board(jetson, orin_tree, capsys):
    code = jetson.main(["--root", str(orin_tree), "--budget-mw", "1e9", "--fps", "0.01", "--runs", "3", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    # Unlimited budget and a frame rate any machine keeps (qemu included): the most capable variant.
    assert report["variant"] == "face_detection_full_range"
    assert report["total_rule"] == "VDD_IN" and report["total_mw"] == pytest.approx(5072 * 1184 / 1000)
    assert [e["variant"] for e in report["estimates"]] == ["face_detection_full_range", "face_detection_short_range"]
    code = jetson.main(["--root", str(orin_tree), "--budget-mw", "100", "--runs", "3"])
    assert code == 1  # below the board's own idle power: nothing fits
    assert "over budget: run" in capsys.readouterr().out


def test_jetson_script_without_rails(jetson, tmp_path, capsys):
    assert jetson.main(["--root", str(tmp_path), "--budget-mw", "5000"]) == 3
    assert "no INA3221 rails" in capsys.readouterr().err


# -- pre-deployment CI check ----------------------------------------------------------------------------


def run_ci_check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    return subprocess.run(
        ["bash", str(EXAMPLES / "ci_check.sh"), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_ci_check_passes_a_good_model(model_path):
    pytest.importorskip("ai_edge_litert")
    done = run_ci_check(str(model_path("face_detection_short_range")), "--runs", "5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: " in done.stdout and "p95" in done.stdout


def test_ci_check_fails_with_the_check_status_on_a_bad_model(tmp_path):
    bad = tmp_path / "truncated.tflite"
    bad.write_bytes(b"\x18\x00\x00\x00TFL3" + b"\x00" * 20)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    direct = subprocess.run([sys.executable, "-m", "edgeinf", "check", str(bad)], capture_output=True, env=env)
    assert direct.returncode != 0
    done = run_ci_check(str(bad))
    assert done.returncode == direct.returncode
    assert "FAIL: edgeinf check refused" in done.stdout
    assert "truncated.tflite" in done.stderr  # the checker's own verdict on the file, passed through


def test_ci_check_latency_budget_gate(model_path):
    pytest.importorskip("ai_edge_litert")
    model_path("face_detection_short_range")  # cached: the script resolves the manifest name
    done = run_ci_check("face_detection_short_range", "--runs", "5", "--max-p95-ms", "0.000001")
    assert done.returncode == 11, done.stdout + done.stderr
    assert "over the budget" in done.stdout


def test_ci_check_usage():
    assert run_ci_check().returncode == 64
    assert run_ci_check("m.tflite", "--bogus").returncode == 64


def test_examples_are_all_tested():
    tested = {"pi_camera_loop.py", "jetson_rails.py", "ci_check.sh", "face_mesh_video.py"}  # the last: tests/pipeline
    assert {p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".sh")} == tested
    assert edgeinf.__version__
