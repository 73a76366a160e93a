"""Power measurement, energy profiles and a scheduler that holds a power budget.

>>> from edgeinf import power
>>> found = power.discover()                  # doctest: +SKIP
>>> found.total.read().power_mw               # doctest: +SKIP
"""

from .discover import Discovery, discover
from .sensors import EnergyMeter, ModelSensor, PowerModel, PowerSample, TempSample, integrate_energy_uj

__all__ = ["Discovery", "EnergyMeter", "ModelSensor", "PowerModel", "PowerSample", "TempSample", "discover", "integrate_energy_uj"]
