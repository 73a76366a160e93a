"""Which board edgeinf runs on: Raspberry Pi 3/4/5, Jetson, or a generic x86_64/aarch64 machine.

The answer comes from the files the kernel exposes, read without privileges:
``/proc/device-tree/model`` (the board's name on every device-tree machine),
``/proc/cpuinfo`` (core type from the ARM "CPU part" field, ISA features) and, on Jetson,
``/etc/nv_tegra_release`` (the L4T release). The root directory is a parameter, so tests
describe boards with small fake trees. Nothing here imports a runtime or the native module.

>>> from edgeinf import board
>>> b = board.detect()
>>> b.key in ("pi3", "pi4", "pi5") or b.family in ("jetson", "generic", "raspberry-pi")
True
"""

from __future__ import annotations

import os
import platform
import re
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# (implementer, part) from /proc/cpuinfo -> core name. Parts of the cores edge boards carry
# (Arm's MIDR part numbers; NVIDIA's own cores for the older Jetsons).
CORE_NAMES: dict[tuple[int, int], str] = {
    (0x41, 0xB76): "ARM1176",  # Pi 1, Pi Zero
    (0x41, 0xC07): "Cortex-A7",  # Pi 2 v1.1
    (0x41, 0xD03): "Cortex-A53",  # Pi 3, Pi Zero 2 W
    (0x41, 0xD04): "Cortex-A35",
    (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57",  # Jetson Nano, TX1, TX2
    (0x41, 0xD08): "Cortex-A72",  # Pi 4, Pi 400, CM4
    (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75",
    (0x41, 0xD0B): "Cortex-A76",  # Pi 5, Pi 500, CM5
    (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77",
    (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD42): "Cortex-A78AE",  # Jetson Orin
    (0x41, 0xD44): "Cortex-X1",
    (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2",
    (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4B): "Cortex-A78C",
    (0x4E, 0x003): "Denver 2",  # Jetson TX2
    (0x4E, 0x004): "Carmel",  # Jetson Xavier
}

# Features worth a line in `edgeinf info` and in benchmark records (the full list stays on Board).
NOTABLE_FEATURES = (
    "asimd",
    "asimddp",  # SDOT/UDOT: int8 dot products (A76 and later, not A53/A72)
    "asimdhp",
    "i8mm",
    "sve",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "amx_int8",  # AMX tiles: the avx512amx path (Sapphire Rapids and later Xeons)
)

# Raspberry Pi SoC generation -> board key, for models whose name carries no number.
_PI_KEY_BY_CORE = {"ARM1176": "pi1", "Cortex-A7": "pi2", "Cortex-A53": "pi3", "Cortex-A72": "pi4", "Cortex-A76": "pi5"}
_JETSON_KEY_BY_CORE = {"Cortex-A78AE": "jetson-orin", "Carmel": "jetson-xavier", "Denver 2": "jetson-tx2"}


@dataclass(frozen=True)
class Board:
    """What edgeinf knows about the machine it runs on.

    Attributes:
        key: short board name: ``pi3``, ``pi4``, ``pi5`` (by SoC generation: a Pi 400 is
            ``pi4``, a Zero 2 W ``pi3``), ``jetson-orin``/``jetson-xavier``/``jetson-nano``/
            ``jetson-tx2``/``jetson``, or the machine name (``x86_64``, ``aarch64``) when generic.
        family: ``raspberry-pi``, ``jetson`` or ``generic``.
        model: the device-tree model (``Raspberry Pi 5 Model B Rev 1.0``), else the CPU's
            model name, else ``""``.
        machine: the user-space architecture Python runs as (``aarch64``, ``armv7l``, ``x86_64``).
        cores: distinct core names in the order the CPUs list them (``("Cortex-A76",)``).
        cpu_count: logical CPUs listed in /proc/cpuinfo.
        features: ISA features from the ``Features`` (ARM) or ``flags`` (x86) line.
        l4t_release: Jetson's Linux for Tegra release (``R35.4.1``), else None.
        emulated: True under qemu-user (the wrapper sets QEMU_CPU / QEMU_LD_PREFIX); timings
            from such a run say nothing about the board.
    """

    key: str
    family: str
    model: str
    machine: str
    cores: tuple[str, ...] = ()
    cpu_count: int = 0
    features: frozenset[str] = field(default_factory=frozenset)
    l4t_release: str | None = None
    emulated: bool = False

    @property
    def dotprod(self) -> bool:
        """The CPU has the Armv8.2 dot-product instructions (what the ``neondot`` kernels need)."""
        return "asimddp" in self.features

    @property
    def notable_features(self) -> tuple[str, ...]:
        return tuple(f for f in NOTABLE_FEATURES if f in self.features)

    def summary(self) -> str:
        """One line for `edgeinf info`, e.g. ``Raspberry Pi 5 Model B Rev 1.0 (pi5): 4x Cortex-A76, ...``."""
        cores = "+".join(self.cores) or "unknown cores"
        count = f"{self.cpu_count}x " if self.cpu_count else ""
        parts = [f"{self.model or self.key} ({self.key}): {count}{cores}", self.machine]
        if self.notable_features:
            parts.append(" ".join(self.notable_features))
        if self.l4t_release:
            parts.append(f"L4T {self.l4t_release}")
        if self.emulated:
            parts.append("EMULATED (timings are not the board's)")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        """JSON-ready record for `edgeinf info --json` and benchmark records."""
        return {
            "summary": self.summary(),
            "board": self.key,
            "family": self.family,
            "model": self.model,
            "machine": self.machine,
            "cores": list(self.cores),
            "cpu_count": self.cpu_count,
            "features": list(self.notable_features),
            "dotprod": self.dotprod,
            "l4t_release": self.l4t_release,
            "emulated": self.emulated,
        }

    describe = as_dict


@dataclass(frozen=True)
class TargetHint:
    """The TFLite runtime a board typically runs, as a default for `edgeinf check --target`.

    Attributes:
        runtime: ``ai-edge-litert`` or ``tflite-runtime`` (the distribution names on PyPI).
        version: the installed or typical version; None means "the latest release".
        reason: why this runtime, in one sentence.
    """

    runtime: str
    version: str | None
    reason: str

    @property
    def spec(self) -> str:
        """As ``edgeinf check --target`` takes it: ``tflite-runtime==2.14.0``, or ``ai-edge-litert``."""
        return f"{self.runtime}=={self.version}" if self.version else self.runtime


def _read_text(path: Path) -> str:
    try:
        # Device-tree strings end in NUL; some kernels add a newline instead.
        return path.read_bytes().decode("utf-8", "replace").replace("\x00", "").strip()
    except OSError:
        return ""


def _parse_cpuinfo(text: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    """Split /proc/cpuinfo into per-processor blocks and the trailing board-wide fields."""
    blocks: list[dict[str, str]] = []
    extra: dict[str, str] = {}
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if "processor" in current:
                blocks.append(current)
            else:
                extra.update(current)
            current = {}
            continue
        name, sep, value = line.partition(":")
        if sep:
            current[name.strip().lower()] = value.strip()
    return blocks, extra


def _int(value: str | None) -> int | None:
    try:
        return int(value, 0) if value else None
    except ValueError:
        return None


def core_name(implementer: int | None, part: int | None) -> str:
    """Core name for a /proc/cpuinfo (implementer, part) pair, e.g. (0x41, 0xd0b) -> ``Cortex-A76``."""
    if implementer is None or part is None:
        return ""
    return CORE_NAMES.get((implementer, part), f"0x{implementer:02x}:0x{part:03x}")


def _cores(blocks: list[dict[str, str]]) -> tuple[str, ...]:
    names: list[str] = []
    for block in blocks:
        name = core_name(_int(block.get("cpu implementer")), _int(block.get("cpu part")))
        name = name or block.get("model name", "")
        if name and name not in names:
            names.append(name)
    return tuple(names)


def _features(blocks: list[dict[str, str]]) -> frozenset[str]:
    for block in blocks:
        line = block.get("features") or block.get("flags")
        if line:
            return frozenset(line.split())
    return frozenset()


def _machine_from_cpuinfo(blocks: list[dict[str, str]]) -> str:
    if not blocks:
        return ""
    first = blocks[0]
    if "cpu implementer" in first:
        arch = first.get("cpu architecture", "")
        return "aarch64" if arch in ("8", "9", "AArch64") else f"armv{arch}l" if arch.isdigit() else "arm"
    if "vendor_id" in first or "flags" in first:
        return "x86_64"
    return ""


def _running_machine() -> str:
    machine = platform.machine().lower()
    if machine == "arm64":
        machine = "aarch64"
    # A 32-bit Pi OS on a 64-bit kernel reports aarch64 from uname while Python is 32-bit.
    if machine == "aarch64" and struct.calcsize("P") == 4:
        machine = "armv7l"
    return machine


def _l4t_release(text: str) -> str | None:
    # "# R35 (release), REVISION: 4.1, GCID: ..., BOARD: t186ref, EABI: aarch64, DATE: ..."
    match = re.search(r"R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text)
    return f"R{match.group(1)}.{match.group(2)}" if match else None


def _pi_key(model: str, cores: tuple[str, ...]) -> str:
    # "Raspberry Pi 5 Model B", "Raspberry Pi 400", "Raspberry Pi Compute Module 4", "Raspberry Pi 3 Model B Plus"
    match = re.match(r"Raspberry Pi (?:Compute Module )?(\d)", model)
    if match:
        return f"pi{match.group(1)}"
    for core in cores:  # Zero 2 W (BCM2710A1) and other un-numbered models
        if core in _PI_KEY_BY_CORE:
            return _PI_KEY_BY_CORE[core]
    return "pi"


def _jetson_key(model: str, cores: tuple[str, ...]) -> str:
    lowered = model.lower()
    for word, key in (
        ("orin", "jetson-orin"),
        ("xavier", "jetson-xavier"),
        ("tx2", "jetson-tx2"),
        ("nano", "jetson-nano"),
    ):
        if word in lowered:
            return key
    for core in cores:
        if core in _JETSON_KEY_BY_CORE:
            return _JETSON_KEY_BY_CORE[core]
    return "jetson"


def detect(
    root: str | os.PathLike = "/", *, machine: str | None = None, environ: Mapping[str, str] | None = None
) -> Board:
    """Identify the board from the files under ``root``.

    Args:
        root: the file-system root to read (``/`` on a device; a fake tree in tests).
        machine: the user-space architecture; by default the running Python's for the
            real root, else inferred from the tree's /proc/cpuinfo.
        environ: environment to look for qemu's variables in (default ``os.environ``).

    Returns:
        A `Board`. Missing or unreadable files give a generic board, never an error.
    """
    base = Path(root)
    environ = os.environ if environ is None else environ
    model = _read_text(base / "proc/device-tree/model") or _read_text(base / "sys/firmware/devicetree/base/model")
    blocks, board_fields = _parse_cpuinfo(_read_text(base / "proc/cpuinfo"))
    cores = _cores(blocks)
    if not machine:
        machine = _running_machine() if base.resolve() == Path("/") else _machine_from_cpuinfo(blocks)
    machine = machine or "unknown"
    # Older Pi kernels put the board name only in cpuinfo's trailing "Model" line.
    model = model or board_fields.get("model", "")
    tegra = _read_text(base / "etc/nv_tegra_release")
    emulated = bool(environ.get("QEMU_CPU") or environ.get("QEMU_LD_PREFIX"))
    features = _features(blocks)

    def board(key: str, family: str, model: str, l4t_release: str | None = None) -> Board:
        return Board(
            key=key,
            family=family,
            model=model,
            machine=machine,
            cores=cores,
            cpu_count=len(blocks),
            features=features,
            l4t_release=l4t_release,
            emulated=emulated,
        )

    if model.startswith("Raspberry Pi"):
        return board(_pi_key(model, cores), "raspberry-pi", model)
    if tegra or "jetson" in model.lower():
        return board(_jetson_key(model, cores), "jetson", model, _l4t_release(tegra))
    if not model and blocks:
        model = blocks[0].get("model name", "")
    return board(machine, "generic", model)


def identify() -> Board:
    """The board this process runs on (`detect` on the real root)."""
    return detect()


def installed_runtimes() -> dict[str, str]:
    """Installed TFLite runtime distributions and their versions, read from package metadata (no import)."""
    from importlib import metadata

    found = {}
    for dist in ("ai-edge-litert", "tflite-runtime"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def default_target(
    board: Board | None = None,
    *,
    installed: Mapping[str, str] | None = None,
    python_version: tuple[int, int] | None = None,
) -> TargetHint:
    """The TFLite runtime to check models against when `edgeinf check` is given no ``--target``.

    What is installed wins; otherwise the runtime that publishes wheels for this board and
    Python: ai-edge-litert has aarch64 and x86_64 wheels for CPython 3.9 and later (2.1.0 is
    the last for 3.9) and none for 32-bit ARM, where tflite-runtime 2.14.0 is the last
    release; tflite-runtime 2.13.0 is the last with aarch64 wheels for CPython 3.8 (JetPack 5).

    Args:
        board: the board (default: `detect()`).
        installed: runtime distribution -> version (default: `installed_runtimes()`).
        python_version: (major, minor) of the target Python (default: this one).
    """
    board = board or detect()
    installed = installed_runtimes() if installed is None else installed
    major_minor = python_version or sys.version_info[:2]
    for runtime in ("ai-edge-litert", "tflite-runtime"):
        if runtime in installed:
            return TargetHint(runtime, installed[runtime], f"{runtime} {installed[runtime]} is installed")
    if board.machine.startswith("armv"):
        return TargetHint("tflite-runtime", "2.14.0", "ai-edge-litert publishes no 32-bit ARM wheels")
    jetpack = f" (JetPack with L4T {board.l4t_release})" if board.l4t_release else ""
    if major_minor < (3, 9):
        return TargetHint(
            "tflite-runtime",
            "2.13.0",
            f"Python {major_minor[0]}.{major_minor[1]}{jetpack} has no ai-edge-litert wheels",
        )
    if major_minor == (3, 9):
        return TargetHint("ai-edge-litert", "2.1.0", "2.1.0 is the last ai-edge-litert release for Python 3.9")
    return TargetHint("ai-edge-litert", None, f"the current LiteRT release has {board.machine} wheels for this Python")


# -- run conditions: what makes a board slower than its cores ------------------------------

HOT_C = 80.0  # the Pi 4/5 firmware starts soft throttling at 80-85 °C


def conditions(
    root: str | os.PathLike = "/",
    *,
    vcgencmd: str | None = "vcgencmd",
    runner=None,
    environ: Mapping[str, str] | None = None,
) -> dict:
    """What skews a timing on this machine right now: the CPU, the cpufreq governor and clocks,
    the temperature, and the Raspberry Pi firmware's throttling and under-voltage flags.

    Args:
        root: the file-system root (a fake tree in tests).
        vcgencmd: the Pi's ``vcgencmd``, asked ``get_throttled`` only when it is installed;
            None to skip it.
        runner: a replacement for ``subprocess.run`` (tests give canned output).
        environ: as for `detect` (qemu's variables mark an emulated run).

    Returns:
        A JSON-ready dict: ``cpu``, ``governors``, ``clock_mhz`` (``current``, ``max``: the policy
        limit, ``hardware_max``: what the core can do, each per cpufreq policy), ``temperature_c``
        (the hottest thermal zone, None without one), ``throttled`` (flags now and since boot,
        None without vcgencmd) and ``warnings``: one sentence per condition that makes a run slower
        than the board can be. Unreadable files leave their entry empty, never an error.
    """
    import shutil
    import subprocess

    from .errors import SensorError
    from .power.knobs import cpufreq_policies
    from .power.sensors.base import Sysfs
    from .power.sensors.rpi import read_throttled
    from .power.sensors.thermal import thermal_zones

    sysfs = Sysfs(root)
    found = detect(root, environ=environ)
    result: dict = {"cpu": "+".join(found.cores) or found.model, "governors": [], "temperature_c": None}
    clocks: dict[str, list[float | None]] = {"current": [], "max": [], "hardware_max": []}
    warnings = []
    for policy in cpufreq_policies(sysfs):
        governor = sysfs.try_read_text(policy.directory / "scaling_governor")
        values = {
            key: _khz(sysfs.try_read_text(policy.directory / name))
            for key, name in (("current", "scaling_cur_freq"), ("max", "scaling_max_freq"),
                              ("hardware_max", "cpuinfo_max_freq"))
        }  # fmt: skip
        result["governors"].append(governor)
        for key, value in values.items():
            clocks[key].append(value)
        if governor and governor != "performance":
            warnings.append(f"cpufreq governor '{governor}' on {policy.directory.name}: clocks ramp up during a run")
        if values["max"] and values["hardware_max"] and values["max"] < values["hardware_max"]:
            warnings.append(
                f"{policy.directory.name} capped at {values['max']:.0f} of {values['hardware_max']:.0f} MHz"
            )
    result["clock_mhz"] = clocks
    temps = []
    for zone in thermal_zones(sysfs):
        try:
            temps.append(zone.read().temp_mc / 1000)
        except SensorError:
            continue
    if temps:
        result["temperature_c"] = max(temps)
        if result["temperature_c"] >= HOT_C:
            warnings.append(f"{result['temperature_c']:.0f} °C: at the firmware's throttling threshold")
    result["throttled"] = None
    if vcgencmd and (runner is not None or shutil.which(vcgencmd)):
        try:
            flags = read_throttled(vcgencmd, runner=runner or subprocess.run)
        except SensorError as exc:
            result["throttled"] = {"error": str(exc)}
        else:
            result["throttled"] = {"raw": hex(flags.raw), "flags": flags.active()}
            now = [f for f in flags.active() if not f.endswith("_occurred")]
            if now:
                warnings.append(f"firmware reports {', '.join(now).replace('_', ' ')} now")
            elif flags.active():
                warnings.append(f"since boot: {', '.join(flags.active()).replace('_', ' ')}")
    if found.emulated:
        warnings.append("emulated under qemu: timings say nothing about the board")
    result["warnings"] = warnings
    return result


def _khz(text: str | None) -> float | None:
    """MHz from a cpufreq kHz file's text."""
    value = _int(text)
    return value / 1000 if value else None


def conditions_summary(cond: dict) -> str:
    """One line: governor, clock, temperature, flags, then the warnings (or "no throttling seen")."""
    parts = []
    if cond.get("governors"):
        parts.append("governor " + "/".join(sorted({g or "?" for g in cond["governors"]})))
    current = [c for c in cond.get("clock_mhz", {}).get("current", []) if c]
    top = [c for c in cond.get("clock_mhz", {}).get("hardware_max", []) if c]
    if current:
        parts.append(f"clock {max(current):.0f}" + (f" of {max(top):.0f} MHz" if top else " MHz"))
    if cond.get("temperature_c") is not None:
        parts.append(f"{cond['temperature_c']:.1f} °C")
    if cond.get("throttled") and "flags" in cond["throttled"]:
        parts.append(f"throttled={cond['throttled']['raw']}")
    head = ", ".join(parts) or "no cpufreq, thermal or firmware readings"
    warnings = cond.get("warnings") or []
    return f"{head}; " + ("; ".join(warnings) if warnings else "nothing slowing the run seen")
