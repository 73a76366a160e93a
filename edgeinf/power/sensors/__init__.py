"""Power and temperature sensors, one module per family; see `edgeinf.power.discover`."""

from .base import (
    EnergyMeter,
    PowerSample,
    PowerSensor,
    StuckGuard,
    SumSensor,
    Sysfs,
    TempSample,
    TempSensor,
    counter_delta,
    integrate_energy_uj,
)
from .battery import BatterySensor, batteries
from .estimate import CpuActivity, ModelSensor, PowerModel
from .hwmon import HwmonPowerSensor, Ina3221Channel, hwmon_devices, hwmon_power_sensors, ina3221_channels
from .jetson import IioRail, RailTotal, TotalRule, choose_total, iio_rails, jetson_rails, jetson_total
from .rapl import RaplSensor, rapl_zones
from .rpi import PiPmicSensor, ThrottleFlags, parse_pmic_read_adc, read_throttled
from .serialmeter import LineMeter, UmMeter, decode_um_record, encode_um_record, parse_meter_line, um_record_valid
from .tegrastats import TegrastatsSensor, parse_tegrastats
from .thermal import ThermalZone, find_zone, thermal_zones
from .throttle import CpufreqThrottleSensor, PiThrottleSensor, ThrottleSample, ThrottleSensor, ZoneThrottleSensor

__all__ = [
    "BatterySensor",
    "CpuActivity",
    "EnergyMeter",
    "HwmonPowerSensor",
    "IioRail",
    "Ina3221Channel",
    "LineMeter",
    "ModelSensor",
    "PiPmicSensor",
    "PowerModel",
    "PowerSample",
    "PowerSensor",
    "RailTotal",
    "RaplSensor",
    "StuckGuard",
    "SumSensor",
    "Sysfs",
    "TegrastatsSensor",
    "TempSample",
    "TempSensor",
    "ThermalZone",
    "CpufreqThrottleSensor",
    "PiThrottleSensor",
    "ThrottleFlags",
    "ThrottleSample",
    "ThrottleSensor",
    "ZoneThrottleSensor",
    "TotalRule",
    "UmMeter",
    "batteries",
    "choose_total",
    "counter_delta",
    "decode_um_record",
    "encode_um_record",
    "find_zone",
    "hwmon_devices",
    "hwmon_power_sensors",
    "iio_rails",
    "ina3221_channels",
    "integrate_energy_uj",
    "jetson_rails",
    "jetson_total",
    "parse_meter_line",
    "parse_pmic_read_adc",
    "parse_tegrastats",
    "rapl_zones",
    "read_throttled",
    "thermal_zones",
    "um_record_valid",
]
