"""The service's configuration: a TOML file (or a dict) read into frozen dataclasses.

Every key is checked here, once: an unknown key, a wrong type or a value out of range is an
`InputError` naming the key, so a typo never silently falls back to a default.

    [server]
    host = "127.0.0.1"
    port = 8080

    [auth]
    keys = ["a-long-random-key"]

    [models.face]
    path = "face_detection_short_range"
    image = { mean = 127.5, std = 127.5, letterbox = true, resize = "area" }
"""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InputError
from ..tomlfile import parse_toml

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


@dataclass(frozen=True)
class VariantConfig:
    """One model file serving a share of a model's traffic.

    Attributes:
        name: the variant's name (``X-Model-Variant`` picks it).
        path: a model file or a manifest name.
        sha256: the file's expected digest (hex); checked before every load when given.
        weight: its share of requests without ``X-Model-Variant`` (relative to the others).
        compare: share of the primary variant's calls also run on this one in the background,
            with the drift exported to ``/metrics`` (`edgeinf.ABTest`); 0 turns it off.
    """

    name: str
    path: str
    sha256: str | None = None
    weight: float = 1.0
    compare: float = 0.0


@dataclass(frozen=True)
class ModelConfig:
    """A served model: its variants and how each is loaded and run.

    Attributes:
        name: the model's name in URLs (``/v1/models/{name}:predict``).
        variants: one or more; the first is the primary (the reference of ``compare``).
        backend: passed to `edgeinf.load`.
        threads: runtime threads per loaded model.
        workers: worker threads per variant, each with its own loaded model.
        image: `Model.run_image` options for image requests (mean, std, letterbox, ...).
        deadline_s: a request's deadline once admitted to the queue; None: ``deadline_factor`` times the
            probe requests' median cost (decode, model, encode), at least ``min_deadline_s`` (see `Limits`).
    """

    name: str
    variants: tuple[VariantConfig, ...]
    backend: str = "auto"
    threads: int = 1
    workers: int = 1
    image: dict = field(default_factory=dict)
    deadline_s: float | None = None


@dataclass(frozen=True)
class Limits:
    """Request limits (per process).

    Attributes:
        rate_per_s: requests per second per API key (per client address without keys); 0: off.
        burst: how many requests a key may make at once before the rate applies.
        queue: requests per variant waiting or running; one more is answered 503.
        deadline_factor: the default deadline is this many times the probe requests' median cost...
        min_deadline_s: ...but never below this (scheduling jitter dwarfs a 1 ms model).
        max_body_bytes: a larger request body is answered 413.
        body_timeout_s: a client that takes longer to send its body is answered 408.
        max_image_pixels: a larger decoded image is refused (400) before it is decoded.
    """

    rate_per_s: float = 0.0
    burst: int = 20
    queue: int = 16
    deadline_factor: float = 3.0
    min_deadline_s: float = 0.1
    max_body_bytes: int = 8 << 20
    body_timeout_s: float = 30.0
    max_image_pixels: int = 4096 * 4096


@dataclass(frozen=True)
class Rollback:
    """When a reloaded model is swapped back for the one it replaced.

    Within ``window_s`` after a reload, once the new variant answered ``min_requests``
    requests, a share of server errors and timeouts above ``error_rate`` restores the old one.
    """

    window_s: float = 60.0
    min_requests: int = 10
    error_rate: float = 0.5


@dataclass(frozen=True)
class ServeConfig:
    """Everything `edgeinf serve` needs.

    Attributes:
        models: the served models by name.
        host, port: where to listen (loopback unless told otherwise).
        keys: API keys allowed to predict and list; ``admin_keys`` may also reload.
        drain_timeout_s: on SIGTERM, how long in-flight requests may take to finish.
        source: the file this came from (SIGHUP reads it again), if any.
    """

    models: dict
    host: str = "127.0.0.1"
    port: int = 8080
    keys: tuple[str, ...] = ()
    admin_keys: tuple[str, ...] = ()
    limits: Limits = Limits()
    rollback: Rollback = Rollback()
    drain_timeout_s: float = 30.0
    log_level: str = "info"
    source: Path | None = None

    @property
    def auth_enabled(self) -> bool:
        return bool(self.keys or self.admin_keys)

    def with_address(self, host: str | None = None, port: int | None = None) -> ServeConfig:
        """A copy listening elsewhere (the ``--host``/``--port`` overrides), checked again."""
        changed = replace(self, host=self.host if host is None else host, port=self.port if port is None else port)
        _check_address(changed)
        return changed


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) can only be reached from this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_config(source: str | os.PathLike | dict) -> ServeConfig:
    """Read and check a service configuration.

    Args:
        source: a TOML file, or the same structure as a dict.

    Raises:
        InputError: unreadable TOML, an unknown key, or a value of the wrong type or range.

    >>> config = load_config("edgeinf.toml")  # doctest: +SKIP
    """
    path = None
    if isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read the serve config {path}: {exc.strerror or exc}") from None
        data = parse_toml(text, path, "a serve config")
    where = str(path) if path else "config"
    _known(data, {"server", "auth", "limits", "rollback", "models"}, where)
    server = _table(data, "server", where)
    _known(server, {"host", "port", "drain_timeout_s", "log_level"}, f"{where} [server]")
    auth = _table(data, "auth", where)
    _known(auth, {"keys", "keys_file", "admin_keys", "admin_keys_file"}, f"{where} [auth]")
    base = path.parent if path else Path.cwd()
    keys = _keys(auth, "keys", base, where)
    admin_keys = _keys(auth, "admin_keys", base, where)
    models_table = _table(data, "models", where)
    if not models_table:
        raise InputError(f"{where}: no [models.<name>] table: nothing to serve")
    models = {name: _model(name, value, base, where) for name, value in models_table.items()}
    config = ServeConfig(
        models=models,
        host=_str(server, "host", "127.0.0.1", where),
        port=_int(server, "port", 8080, 0, 65535, where),
        keys=keys,
        admin_keys=admin_keys,
        limits=_dataclass(Limits, _table(data, "limits", where), f"{where} [limits]"),
        rollback=_dataclass(Rollback, _table(data, "rollback", where), f"{where} [rollback]"),
        drain_timeout_s=_number(server, "drain_timeout_s", 30.0, 0.0, where),
        log_level=_str(server, "log_level", "info", where),
        source=path,
    )
    _check_address(config)
    return config


def _check_address(config: ServeConfig) -> None:
    if not config.auth_enabled and not is_loopback(config.host):
        raise InputError(
            f"refusing to listen on {config.host} without API keys: set [auth] keys (or keys_file), "
            "or listen on 127.0.0.1"
        )


def _known(table: dict, keys: set, where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(keys)}")


def _table(data: dict, key: str, where: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise InputError(f"{where}: {key} must be a table, got {type(value).__name__}")
    return value


def _str(table: dict, key: str, default, where: str):
    value = table.get(key, default)
    if value is not None and not isinstance(value, str):
        raise InputError(f"{where}: {key} must be a string, got {value!r}")
    return value


def _int(table: dict, key: str, default: int, low: int, high: int, where: str) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InputError(f"{where}: {key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _number(table: dict, key: str, default: float, low: float, where: str, high: float = math.inf) -> float:
    value = table.get(key, default)
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise InputError(f"{where}: {key} must be a finite number from {low} to {high}, got {value!r}")
    return float(value)


def _dataclass(cls, table: dict, where: str):
    defaults = cls()
    _known(table, set(vars(defaults)), where)
    values: dict[str, float] = {}
    for key, default in vars(defaults).items():
        if isinstance(default, int):
            values[key] = _int(table, key, default, 0, 1 << 40, where)
        else:
            values[key] = _number(table, key, default, 0.0, where)
    if cls is Limits and values["queue"] < 1:
        raise InputError(f"{where}: queue must be at least 1, got {values['queue']}")
    if cls is Rollback and values["error_rate"] > 1:
        raise InputError(f"{where}: error_rate must be within [0, 1], got {values['error_rate']}")
    return cls(**values)


def _keys(auth: dict, key: str, base: Path, where: str) -> tuple[str, ...]:
    keys = auth.get(key, [])
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        raise InputError(f"{where} [auth]: {key} must be a list of non-empty strings")
    file = _str(auth, f"{key}_file", None, f"{where} [auth]")
    if file is not None:
        file_path = base / Path(file).expanduser()
        try:
            lines = file_path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InputError(f"{where} [auth]: cannot read {key}_file {file_path}: {exc.strerror or exc}") from None
        keys = keys + [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    for k in keys:
        if len(k) < 16:
            raise InputError(f"{where} [auth]: an API key must have at least 16 characters, got one of {len(k)}")
    return tuple(keys)


def _name(name: str, what: str, where: str) -> str:
    if not name or not set(name) <= _NAME_CHARS:
        raise InputError(f"{where}: {what} name {name!r} must be letters, digits, '_', '-' or '.'")
    return name


_MODEL_KEYS = {
    "path",
    "sha256",
    "weight",
    "compare",
    "backend",
    "threads",
    "workers",
    "image",
    "deadline_s",
    "variants",
}
_VARIANT_KEYS = {"path", "sha256", "weight", "compare"}


def _model(name: str, table, base: Path, where: str) -> ModelConfig:
    here = f"{where} [models.{name}]"
    _name(name, "model", where)
    if not isinstance(table, dict):
        raise InputError(f"{here} must be a table")
    _known(table, _MODEL_KEYS, here)
    variants = []
    if "path" in table:
        variants.append(_variant("default", table, base, here))
    elif set(table) & {"sha256", "weight", "compare"}:
        raise InputError(f"{here}: sha256, weight and compare belong to a variant with a path")
    for vname, vtable in _table(table, "variants", here).items():
        vwhere = f"{here} [variants.{vname}]"
        _name(vname, "variant", here)
        if not isinstance(vtable, dict):
            raise InputError(f"{vwhere} must be a table")
        _known(vtable, _VARIANT_KEYS, vwhere)
        if vname in {v.name for v in variants}:
            raise InputError(f"{vwhere}: the name is taken by the model's own path")
        variants.append(_variant(vname, vtable, base, vwhere))
    if not variants:
        raise InputError(f"{here}: give a path (or [models.{name}.variants.<name>] tables with paths)")
    if variants[0].compare > 0:
        raise InputError(f"{here}: compare belongs to a variant compared with the primary, not to the primary")
    if sum(v.compare > 0 for v in variants) > 1:
        raise InputError(f"{here}: only one variant may set compare (each call is shadowed on one candidate)")
    if not any(v.weight > 0 for v in variants):
        raise InputError(f"{here}: at least one variant needs a weight above 0")
    image = _table(table, "image", here)
    deadline = table.get("deadline_s")
    return ModelConfig(
        name=name,
        variants=tuple(variants),
        backend=_str(table, "backend", "auto", here),
        threads=_int(table, "threads", 1, 1, 256, here),
        workers=_int(table, "workers", 1, 1, 64, here),
        image=dict(image),
        deadline_s=None if deadline is None else _number(table, "deadline_s", 0.0, 1e-3, here),
    )


def _variant(name: str, table: dict, base: Path, where: str) -> VariantConfig:
    path = _str(table, "path", None, where)
    if not path:
        raise InputError(f"{where}: path is required (a model file or a manifest name)")
    candidate = base / Path(path).expanduser()
    if not Path(path).is_absolute() and candidate.exists():
        path = str(candidate)  # relative to the config file
    sha256 = _str(table, "sha256", None, where)
    if sha256 is not None and (len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256.lower())):
        raise InputError(f"{where}: sha256 must be 64 hex digits, got {sha256!r}")
    return VariantConfig(
        name=name,
        path=path,
        sha256=sha256.lower() if sha256 else None,
        weight=_number(table, "weight", 1.0, 0.0, where),
        compare=_number(table, "compare", 0.0, 0.0, where, high=1.0),
    )
