"""Per-tenant quotas: sessions open at once, memory and disk per session, operations per
minute, the disk its snapshots hold. A refusal is a :class:`QuotaExceeded`, answered 429 with a
Retry-After the client can honour."""

from __future__ import annotations

import math
import time
from collections import deque

from caisson.config import parse_bytes
from caisson.server.models import Quotas

WINDOW = 60.0


class QuotaExceeded(Exception):
    def __init__(self, quota: str, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.quota = quota
        self.retry_after = max(1, retry_after)


def check_size(quota: str, most: str, requested: str) -> None:
    """A session's ``quota`` (memory, disk) within the tenant's ``most``."""
    if parse_bytes(requested) > parse_bytes(most):
        raise QuotaExceeded(
            quota, f"a session of this tenant may have at most {most} of {quota}; {requested} was asked", retry_after=60
        )


def check_snapshot_disk(quotas: Quotas, held: int, adding: int) -> None:
    """``held``: what the tenant's snapshots hold on the engine; ``adding``: what a new one would copy."""
    if held + adding > parse_bytes(quotas.snapshot_disk):
        raise QuotaExceeded(
            "snapshot_disk",
            f"this tenant's snapshots and forks may hold {quotas.snapshot_disk} of engine disk (snapshot_disk); "
            f"they hold {held / 2**20:.0f} MiB and this snapshot would add {adding / 2**20:.0f} MiB: "
            "snapshots are kept until the server stops, so ask its operator for a larger snapshot_disk",
            retry_after=60,
        )


class RateLimiter:
    """A sliding one-minute window of operation times per tenant."""

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}

    def take(self, tenant_id: str, per_minute: int) -> None:
        now = time.monotonic()
        times = self._times.setdefault(tenant_id, deque())
        while times and times[0] <= now - WINDOW:
            times.popleft()
        if len(times) >= per_minute:
            wait = times[0] + WINDOW - now if times else WINDOW
            raise QuotaExceeded(
                "calls_per_minute",
                f"this tenant may make {per_minute} session operations a minute; try again in {math.ceil(wait)} s",
                retry_after=math.ceil(wait),
            )
        times.append(now)
