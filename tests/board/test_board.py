"""Board identification from fake /proc and /etc trees in the formats real boards write."""

from __future__ import annotations

import json
import platform

import pytest

from edgeinf import board


def arm_cpuinfo(part: str, features: str, count: int = 4, arch: str = "8", implementer: str = "0x41", tail: str = ""):
    block = (
        "processor\t: {i}\nBogoMIPS\t: 108.00\nFeatures\t: {features}\nCPU implementer\t: {implementer}\n"
        "CPU architecture: {arch}\nCPU variant\t: 0x0\nCPU part\t: {part}\nCPU revision\t: 3\n\n"
    )
    text = "".join(
        block.format(i=i, features=features, implementer=implementer, arch=arch, part=part) for i in range(count)
    )
    return text + tail


PI_FEATURES = "fp asimd evtstrm crc32 cpuid"
PI5_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
ORIN_FEATURES = PI5_FEATURES + " uscat ilrcpc flagm paca pacg"


def make_root(tmp_path, *, model=None, cpuinfo=None, tegra=None):
    if model is not None:
        (tmp_path / "proc/device-tree").mkdir(parents=True)
        (tmp_path / "proc/device-tree/model").write_bytes(model.encode() + b"\x00")
    if cpuinfo is not None:
        (tmp_path / "proc").mkdir(exist_ok=True)
        (tmp_path / "proc/cpuinfo").write_text(cpuinfo)
    if tegra is not None:
        (tmp_path / "etc").mkdir()
        (tmp_path / "etc/nv_tegra_release").write_text(tegra)
    return tmp_path


@pytest.mark.parametrize(
    "model, part, features, key, core",
    [
        ("Raspberry Pi 3 Model B Rev 1.2", "0xd03", PI_FEATURES, "pi3", "Cortex-A53"),
        ("Raspberry Pi 3 Model B Plus Rev 1.3", "0xd03", PI_FEATURES, "pi3", "Cortex-A53"),
        ("Raspberry Pi Zero 2 W Rev 1.0", "0xd03", PI_FEATURES, "pi3", "Cortex-A53"),
        ("Raspberry Pi 4 Model B Rev 1.5", "0xd08", PI_FEATURES, "pi4", "Cortex-A72"),
        ("Raspberry Pi 400 Rev 1.0", "0xd08", PI_FEATURES, "pi4", "Cortex-A72"),
        ("Raspberry Pi Compute Module 4 Rev 1.0", "0xd08", PI_FEATURES, "pi4", "Cortex-A72"),
        ("Raspberry Pi 5 Model B Rev 1.0", "0xd0b", PI5_FEATURES, "pi5", "Cortex-A76"),
        ("Raspberry Pi 500 Rev 1.0", "0xd0b", PI5_FEATURES, "pi5", "Cortex-A76"),
    ],
)
def test_raspberry_pi_models(tmp_path, model, part, features, key, core):
    root = make_root(tmp_path, model=model, cpuinfo=arm_cpuinfo(part, features))
    found = board.detect(root, environ={})
    assert (found.key, found.family, found.model) == (key, "raspberry-pi", model)
    assert found.cores == (core,)
    assert found.cpu_count == 4
    assert found.machine == "aarch64"
    assert found.dotprod == ("asimddp" in features.split())
    assert not found.emulated


def test_dotprod_only_on_pi5_cores(tmp_path):
    pi4 = board.detect(
        make_root(tmp_path / "4", model="Raspberry Pi 4 Model B", cpuinfo=arm_cpuinfo("0xd08", PI_FEATURES))
    )
    pi5 = board.detect(
        make_root(tmp_path / "5", model="Raspberry Pi 5 Model B", cpuinfo=arm_cpuinfo("0xd0b", PI5_FEATURES))
    )
    assert "asimddp" not in pi4.notable_features and "asimddp" in pi5.notable_features
    assert pi5.as_dict()["dotprod"] is True and pi4.as_dict()["dotprod"] is False


def test_old_kernel_model_only_in_cpuinfo_tail(tmp_path):
    tail = "Hardware\t: BCM2835\nRevision\t: c03115\nSerial\t\t: 10000000abcdef01\nModel\t\t: Raspberry Pi 4 Model B Rev 1.5\n"
    root = make_root(tmp_path, cpuinfo=arm_cpuinfo("0xd08", PI_FEATURES, tail=tail))
    found = board.detect(root)
    assert (found.key, found.model) == ("pi4", "Raspberry Pi 4 Model B Rev 1.5")
    assert found.cpu_count == 4  # the trailing board block is not a processor


def test_32bit_pi_os_reports_armv7_and_targets_tflite_runtime(tmp_path):
    features = "half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32"
    root = make_root(tmp_path, model="Raspberry Pi 4 Model B Rev 1.4", cpuinfo=arm_cpuinfo("0xd08", features, arch="7"))
    found = board.detect(root)
    assert (found.key, found.machine) == ("pi4", "armv7l")
    hint = board.default_target(found, installed={}, python_version=(3, 11))
    assert (hint.runtime, hint.version, hint.spec) == ("tflite-runtime", "2.14.0", "tflite-runtime==2.14.0")


@pytest.mark.parametrize(
    "model, cpuinfo, key, cores",
    [
        (
            "NVIDIA Jetson Orin Nano Developer Kit",
            arm_cpuinfo("0xd42", ORIN_FEATURES, 6),
            "jetson-orin",
            ("Cortex-A78AE",),
        ),
        (
            "NVIDIA Jetson Nano Developer Kit",
            arm_cpuinfo("0xd07", "fp asimd evtstrm aes pmull sha1 sha2 crc32"),
            "jetson-nano",
            ("Cortex-A57",),
        ),
        # AGX Xavier's device tree says only "Jetson-AGX": its Carmel cores tell the generation.
        ("Jetson-AGX", arm_cpuinfo("0x004", PI5_FEATURES, 8, implementer="0x4e"), "jetson-xavier", ("Carmel",)),
        (
            "quill",
            arm_cpuinfo("0x003", "fp asimd", 2, implementer="0x4e") + arm_cpuinfo("0xd07", "fp asimd", 4),
            "jetson-tx2",
            ("Denver 2", "Cortex-A57"),
        ),
    ],
)
def test_jetson_models(tmp_path, model, cpuinfo, key, cores):
    tegra = "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023\n"
    found = board.detect(make_root(tmp_path, model=model, cpuinfo=cpuinfo, tegra=tegra))
    assert (found.key, found.family, found.cores) == (key, "jetson", cores)
    assert found.l4t_release == "R35.4.1"
    assert "L4T R35.4.1" in found.summary()


def test_jetpack5_python38_targets_tflite_runtime_213(tmp_path):
    root = make_root(
        tmp_path,
        model="NVIDIA Jetson Xavier NX Developer Kit",
        cpuinfo=arm_cpuinfo("0x004", PI5_FEATURES, 6, implementer="0x4e"),
        tegra="# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref, EABI: aarch64, DATE: Sun Mar 19 15:19:21 UTC 2023",
    )
    hint = board.default_target(board.detect(root), installed={}, python_version=(3, 8))
    assert hint.spec == "tflite-runtime==2.13.0"
    assert "R35.3.1" in hint.reason


def test_installed_runtime_wins_over_board_default(tmp_path):
    pi5 = board.detect(make_root(tmp_path, model="Raspberry Pi 5 Model B", cpuinfo=arm_cpuinfo("0xd0b", PI5_FEATURES)))
    assert board.default_target(pi5, installed={"tflite-runtime": "2.14.0"}).spec == "tflite-runtime==2.14.0"
    both = {"tflite-runtime": "2.14.0", "ai-edge-litert": "2.3.0"}
    assert board.default_target(pi5, installed=both).spec == "ai-edge-litert==2.3.0"
    assert board.default_target(pi5, installed={}, python_version=(3, 9)).spec == "ai-edge-litert==2.1.0"
    latest = board.default_target(pi5, installed={}, python_version=(3, 11))
    assert (latest.runtime, latest.version, latest.spec) == ("ai-edge-litert", None, "ai-edge-litert")


def test_generic_x86(tmp_path):
    cpuinfo = "".join(
        f"processor\t: {i}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx fma avx2 f16c\n\n"
        for i in range(2)
    )
    found = board.detect(make_root(tmp_path, cpuinfo=cpuinfo))
    assert (found.key, found.family, found.machine, found.model) == ("x86_64", "generic", "x86_64", "AMD EPYC 7B13")
    assert found.notable_features == ("avx2", "fma", "f16c")
    assert not found.dotprod


def test_generic_aarch64_server_has_unknown_part_spelled_out(tmp_path):
    found = board.detect(make_root(tmp_path, cpuinfo=arm_cpuinfo("0xfff", "fp asimd", 2, implementer="0x61")))
    assert (found.key, found.family, found.cores) == ("aarch64", "generic", ("0x61:0xfff",))


def test_missing_files_give_a_generic_board_not_an_error(tmp_path):
    found = board.detect(tmp_path, machine="riscv64")
    assert (found.key, found.family, found.model, found.cores, found.cpu_count) == ("riscv64", "generic", "", (), 0)
    assert found.summary().startswith("riscv64 (riscv64): unknown cores")


def test_emulation_is_flagged_from_qemu_environment(tmp_path):
    root = make_root(tmp_path, model="Raspberry Pi 5 Model B Rev 1.0", cpuinfo=arm_cpuinfo("0xd0b", PI5_FEATURES))
    found = board.detect(root, environ={"QEMU_CPU": "cortex-a76"})
    assert found.emulated and found.as_dict()["emulated"] is True
    assert "EMULATED" in found.summary()


def test_core_names_of_the_pi_generations():
    assert [board.core_name(0x41, p) for p in (0xD03, 0xD08, 0xD0B)] == ["Cortex-A53", "Cortex-A72", "Cortex-A76"]
    assert board.core_name(None, 0xD03) == ""


def test_this_machine_agrees_with_the_native_cpu_detection():
    """/proc/cpuinfo (read by board) and cpuid/HWCAP (read by the native module) must agree."""
    native_isa = pytest.importorskip("edgeinf.isa", reason="native module not built")
    here = board.detect()
    native = native_isa.cpu_features()
    machine = platform.machine()
    if machine == "x86_64":
        assert here.machine == "x86_64"
        assert ("avx2" in here.features) == native["avx2"], (sorted(here.features), native)
        assert native["arm_core"] is None and native["arm_out_of_order"] is False
    elif machine == "aarch64":
        assert here.machine == "aarch64"
        assert ("asimddp" in here.features) == native["dotprod"], (sorted(here.features), native)
        assert ("asimd" in here.features) == native["neon"], (sorted(here.features), native)
    else:
        pytest.skip(f"no native feature cross-check written for {machine}")
    assert here.cpu_count >= 1
    assert here.as_dict()["board"] == here.key


def test_identify_describes_this_machine_for_info_and_records():
    record = board.identify().describe()
    assert record == board.detect().as_dict()
    assert record["summary"].startswith(record["model"] or record["board"])
    assert set(record) >= {"board", "family", "model", "machine", "cores", "features", "dotprod", "emulated"}


def test_edgeinf_info_reports_the_board(model_path, capsys):
    pytest.importorskip("ai_edge_litert")
    from edgeinf.cli import main

    assert main(["info", str(model_path("face_detection_short_range")), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["board"] == board.detect().as_dict()
    assert main(["info", str(model_path("face_detection_short_range"))]) == 0
    board_line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("board ")]
    assert board_line and board_line[0].split(None, 1)[1] == board.detect().summary()


def test_benchmark_records_carry_the_board_and_whether_it_was_emulated():
    from edgeinf import bench

    machine = bench.environment()["machine"]
    assert machine["board"] == board.detect().as_dict()
    assert machine["board"]["emulated"] == board.detect().emulated


def test_check_target_strings_of_the_hint_are_understood_by_the_checker():
    tables = pytest.importorskip("edgeinf.compat.tables")
    target = tables.resolve("tflite", board.TargetHint("tflite-runtime", "2.14.0", "").spec)
    assert (target.package, target.version) == ("tflite_runtime", "2.14.0")
    assert tables.resolve("tflite", board.TargetHint("ai-edge-litert", None, "").spec).package == "ai_edge_litert"


def test_check_defaults_to_what_the_board_runs_when_no_runtime_is_installed(tmp_path, monkeypatch):
    tables = pytest.importorskip("edgeinf.compat.tables")
    features = "half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32"
    pi4_32bit = board.detect(
        make_root(tmp_path, model="Raspberry Pi 4 Model B Rev 1.4", cpuinfo=arm_cpuinfo("0xd08", features, arch="7"))
    )
    monkeypatch.setattr(board, "detect", lambda *a, **k: pi4_32bit)
    monkeypatch.setattr(tables, "installed_version", lambda package: None)
    target = tables.resolve("tflite")
    assert (target.package, target.version) == ("tflite_runtime", "2.14.0")
    assert "no 32-bit ARM wheels" in target.note
