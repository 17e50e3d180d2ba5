"""API keys: ``cai_<key id>_<secret>`` bearer tokens, kept only as SHA-256 digests. An admin
key manages tenants and keys; a tenant key acts for its tenant, and for nothing else."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from caisson.server.models import CreatedKey, KeyInfo
from caisson.server.store import Store

PREFIX = "cai"
# A revoked key may still be honoured this long by a server that looked it up just before.
CACHE_SECONDS = 5.0


class Unauthorized(Exception):
    """No key, a malformed key, an unknown, wrong or revoked key: all answer 401 alike."""


class Forbidden(Exception):
    """A valid key of the wrong scope (an admin key on a tenant route, or the reverse)."""


@dataclass(frozen=True)
class Principal:
    key_id: str
    scope: str
    tenant_id: str | None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_key_id() -> str:
    return "k" + secrets.token_hex(6)


async def create_key(store: Store, scope: str, tenant_id: str | None, label: str = "") -> CreatedKey:
    key = KeyInfo(id=new_key_id(), tenant_id=tenant_id, scope=scope, label=label, created=time.time())  # type: ignore[arg-type]
    token = f"{PREFIX}_{key.id}_{secrets.token_urlsafe(32)}"
    await store.add_key(key, digest(token))
    return CreatedKey(**key.model_dump(), token=token)


class KeyChecker:
    """Resolves bearer tokens to principals; recent look-ups are cached, so a burst of calls
    costs one database read per key every few seconds."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._cache: dict[str, tuple[float, Principal]] = {}

    async def check(self, authorization: str | None) -> Principal:
        if not authorization or not authorization.lower().startswith("bearer "):
            raise Unauthorized("send the API key as 'Authorization: Bearer cai_...'")
        token = authorization[7:].strip()
        parts = token.split("_", 2)
        if len(parts) != 3 or parts[0] != PREFIX:
            raise Unauthorized("malformed API key: it looks like cai_<key id>_<secret>")
        token_digest = digest(token)
        cached = self._cache.get(token_digest)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        found = await self._store.key(parts[1])
        if found is None or found[0].revoked or not hmac.compare_digest(found[1], token_digest):
            raise Unauthorized("unknown or revoked API key")
        key = found[0]
        principal = Principal(key_id=key.id, scope=key.scope, tenant_id=key.tenant_id)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[token_digest] = (time.monotonic(), principal)
        return principal

    def forget(self, key_id: str) -> None:
        """Drop a revoked key from this server's cache at once."""
        self._cache = {d: (t, p) for d, (t, p) in self._cache.items() if p.key_id != key_id}
