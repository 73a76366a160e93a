"""API keys: who may predict, who may also reload.

Keys come in ``Authorization: Bearer <key>`` or ``X-API-Key``. Every configured key is
compared with `hmac.compare_digest` (constant time, and all of them, so the time taken
does not tell which key nearly matched). With no keys configured the service is local-only:
the config refuses to listen beyond loopback and a request from elsewhere is refused.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from .config import ServeConfig, is_loopback

PREDICT = "predict"
ADMIN = "admin"


@dataclass(frozen=True)
class Identity:
    """Who is calling: ``key_id`` labels rate limits and logs (never the key itself)."""

    key_id: str
    admin: bool


class AuthError(Exception):
    """Refused: ``status`` 401 (no or unknown key) or 403 (known but not allowed, or not local)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Authenticator:
    def __init__(self, config: ServeConfig):
        self._keys = [(k.encode(), f"key{i}", False) for i, k in enumerate(config.keys)]
        self._keys += [(k.encode(), f"admin{i}", True) for i, k in enumerate(config.admin_keys)]
        self.enabled = bool(self._keys)

    def identify(self, headers, client_host: str | None, scope: str) -> Identity:
        """The caller's identity for an action of ``scope`` (`PREDICT` or `ADMIN`).

        Raises:
            AuthError: the request may not do this.
        """
        if not self.enabled:
            if client_host is None or not is_loopback(client_host):
                raise AuthError(403, "this service has no API keys and answers local clients only")
            return Identity(key_id=f"client:{client_host}", admin=True)
        given = _presented_key(headers)
        if given is None:
            raise AuthError(401, "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
        found = None
        encoded = given.encode()
        for key, key_id, admin in self._keys:  # every key, whatever matched: constant time
            if hmac.compare_digest(encoded, key) and found is None:
                found = Identity(key_id, admin)
        if found is None:
            raise AuthError(401, "unknown API key")
        if scope == ADMIN and not found.admin:
            raise AuthError(403, "this API key may not reload models: an admin key is required")
        return found


def _presented_key(headers) -> str | None:
    value = headers.get("authorization")
    if value:
        scheme, _, token = value.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    value = headers.get("x-api-key")
    return value.strip() if value and value.strip() else None
