"""Power measurement, energy profiles and a scheduler that holds a power budget.

>>> from edgeinf import power
>>> found = power.discover()                                   # doctest: +SKIP
>>> found.total.read().power_mw                                # doctest: +SKIP
>>> prof = power.profile({"short": "short.tflite"}, threads=(1, 2))   # doctest: +SKIP
>>> sched = power.Scheduler(5.0, window_s=1.0, profile=prof, sensor=found.total)  # doctest: +SKIP

The simulator (`edgeinf.power.simulate`, needs numpy) is imported on demand.
"""

from .discover import Discovery, discover
from .knobs import CpuFreqPolicy, ThermalLimit, cpufreq_policies
from .profiles import Config, ConfigProfile, Profile, profile
from .scheduler import Decision, Request, Scheduler, SchedulerReport
from .sensors import EnergyMeter, ModelSensor, PowerModel, PowerSample, TempSample, integrate_energy_uj
from .thermal import ThermalModel, ThermalParams

__all__ = [
    "Config",
    "ConfigProfile",
    "CpuFreqPolicy",
    "Decision",
    "Discovery",
    "EnergyMeter",
    "ModelSensor",
    "PowerModel",
    "PowerSample",
    "Profile",
    "Request",
    "Scheduler",
    "SchedulerReport",
    "TempSample",
    "ThermalLimit",
    "ThermalModel",
    "ThermalParams",
    "cpufreq_policies",
    "discover",
    "integrate_energy_uj",
    "profile",
]
