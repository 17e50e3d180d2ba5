"""The reaper: removes caisson containers whose TTL passed, that stopped, or whose owner is
provably gone and that would not end by themselves (a session with a grace period ends a
grace after its controller, and may meanwhile be re-attached: the reaper leaves it alone)."""

from __future__ import annotations

import socket
import time

import docker
from pydantic import BaseModel

from caisson.config import process_start_ticks
from caisson.docker.containers import (
    LABEL_EXPIRES,
    LABEL_GRACE,
    LABEL_OWNER,
    LABEL_SESSION,
    list_session_containers,
    remove_container,
)
from caisson.logs import get_logger

log = get_logger("caisson.gc")


class Reaped(BaseModel):
    session: str
    container: str
    reason: str


def owner_alive(owner: str) -> bool:
    """Owners on other hosts are presumed alive: only their TTL can condemn them here."""
    host, _, rest = owner.partition(":")
    pid, _, ticks = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return process_start_ticks(int(pid)) == ticks and ticks != ""


# A container another live controller is still setting up sits in "created" briefly.
CREATED_GRACE = 120.0


def reason_to_reap(labels: dict[str, str], state: str, created: float, now: float) -> str | None:
    try:
        expires = float(labels.get(LABEL_EXPIRES, "inf"))
    except ValueError:
        expires = 0.0
    if expires < now:
        return "ttl expired"
    if not owner_alive(labels.get(LABEL_OWNER, "")) and not labels.get(LABEL_GRACE):
        return "owner process is gone"
    if state in ("exited", "dead") or (state == "created" and now - created > CREATED_GRACE):
        return f"container is {state}"
    return None


def collect(
    client: docker.DockerClient, *, spare: frozenset[str] = frozenset(), all_owners: bool = False
) -> list[Reaped]:
    """Remove condemned containers; ``spare`` names sessions still being set up (or in use).
    ``all_owners`` removes every caisson container not spared, whoever owns it."""
    now = time.time()
    reaped = []
    for row in list_session_containers(client):
        labels = row.get("Labels") or {}
        session = labels.get(LABEL_SESSION, "")
        if session in spare:
            continue
        reason = "all owners asked for" if all_owners else reason_to_reap(
            labels, str(row.get("State", "")), float(row.get("Created", now)), now
        )
        if reason is None:
            continue
        remove_container(client, str(row["Id"]))
        log.info("reaped sandbox container", session=session, container=str(row["Id"])[:12], reason=reason)
        reaped.append(Reaped(session=session, container=str(row["Id"])[:12], reason=reason))
    return reaped
