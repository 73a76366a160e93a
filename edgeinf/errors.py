"""The exceptions edgeinf raises. Imports nothing from edgeinf.

Every error names what was expected and what was given, so that a message
read in a device log is enough to fix the call.
"""

from __future__ import annotations


class EdgeInfError(Exception):
    """Base class of every error raised by edgeinf."""


class ModelFileError(EdgeInfError, ValueError):
    """A model file is missing, unreadable, truncated, corrupt or of an unknown kind."""


class BackendUnavailableError(EdgeInfError, ImportError):
    """The requested runtime package is not installed or cannot be imported.

    Attributes:
        requested: the backend names asked for.
        available: the backends that can be used on this machine.
    """

    def __init__(self, message: str, requested: tuple[str, ...] = (), available: tuple[str, ...] = ()):
        super().__init__(message)
        self.requested = tuple(requested)
        self.available = tuple(available)


class InputError(EdgeInfError, ValueError):
    """An input given to `Model.run` has the wrong count, name, shape, dtype or layout."""


class UnsupportedOperatorError(EdgeInfError):
    """The compatibility check found operators the chosen runtime cannot run.

    Attributes:
        report: the `CompatReport` that explains, op by op, what cannot run and why.
    """

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class RuntimeFailure(EdgeInfError, RuntimeError):
    """The runtime itself failed (allocation, invocation) on a model that passed the checks."""


class ModelClosedError(EdgeInfError, RuntimeError):
    """A `Model` was used after `close()`."""


class SensorError(EdgeInfError, OSError):
    """A power or thermal sensor is missing, unreadable or returned garbage."""


class FetchError(EdgeInfError, OSError):
    """A model could not be fetched from the package registry or failed its checksum."""
