"""The former name of `edgeinf.isa` (which native kernel path runs, and a way to force
one), kept so that code written against it keeps working."""

from .isa import active_isa, built_isas, cpu_features, emulated_isas, set_isa, supported_isas, use_isa

__all__ = ["active_isa", "built_isas", "cpu_features", "emulated_isas", "set_isa", "supported_isas", "use_isa"]
