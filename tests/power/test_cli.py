"""`edgeinf power` on fake trees: discovered sensors, one reading, live readings, JSON."""

from __future__ import annotations

import json

from edgeinf.cli import main


def _board(tree):
    tree.ina3221(1, "0040", [("VDD_IN", 5000, 1000), ("VDD_CPU_GPU_CV", 5000, 300), ("NC", 0, 0)])
    tree.thermal_zone(0, "CPU-therm", 47500)
    tree.rapl_zone("package-0", max_energy_range_uj=1000)  # energy_uj missing: listed as unavailable


def test_power_once_json(fake_sys, capsys):
    _board(fake_sys)
    assert main(["power", "--root", str(fake_sys.root), "--once", "--json", "--vcgencmd", "none-such"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["power_mw"] == 5000.0
    assert "VDD_IN" in data["total"]["sensor"]
    assert [row["sensor"] for row in data["power"]] == ["VDD_IN", "VDD_CPU_GPU_CV"]
    assert data["power"][1] == {
        "sensor": "VDD_CPU_GPU_CV",
        "power_mw": 1500.0,
        "voltage_mv": 5000.0,
        "current_ma": 300.0,
    }
    assert data["thermal"] == [{"zone": "CPU-therm", "temp_mc": 47500}]
    assert data["unavailable"][0]["sensor"] == "rapl:package-0" and "gone" in data["unavailable"][0]["reason"]


def test_power_once_text(fake_sys, capsys):
    _board(fake_sys)
    assert main(["power", "--root", str(fake_sys.root), "--once", "--vcgencmd", "none-such"]) == 0
    out = capsys.readouterr().out
    assert "total      5.000 W" in out
    assert "thermal    CPU-therm" in out and "47.5 °C" in out
    assert "missing    rapl:package-0" in out


def test_power_live_json_integrates_energy(fake_sys, capsys):
    _board(fake_sys)
    code = main(
        [
            "power",
            "--root",
            str(fake_sys.root),
            "--json",
            "--count",
            "3",
            "--interval",
            "0.05",
            "--vcgencmd",
            "none-such",
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and all(r["power_mw"] == 5000.0 for r in rows)
    elapsed = rows[-1]["t_s"] - rows[0]["t_s"]
    assert elapsed > 0.09
    assert abs(rows[-1]["energy_j"] - 5.0 * elapsed) < 1e-4  # 5 W x elapsed time, integrated


def test_power_without_sensors(tmp_path, capsys):
    assert main(["power", "--root", str(tmp_path), "--once", "--vcgencmd", "none-such"]) == 0
    assert "total      none (no power sensor found)" in capsys.readouterr().out
    assert main(["power", "--root", str(tmp_path), "--count", "1", "--vcgencmd", "none-such"]) == 1
    assert main(["power", "--root", str(tmp_path), "--interval", "0"]) == 2
