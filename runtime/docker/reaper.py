"""The reaper: removes caisson containers whose TTL passed, that stopped, or whose owner is
provably gone and that would not end by themselves (a session with a grace period ends a
grace after its controller, and may meanwhile be re-attached: the reaper leaves it alone).
A container a dead controller left paused mid-snapshot gets its files back and runs again
first (docker/sparse.py)."""

from __future__ import annotations

import time

import docker

from caisson.backend import Reaped
from caisson.config import owner_alive
from caisson.docker import sparse
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
        state = str(row.get("State", ""))
        if state == "paused":
            # Paused by a controller that is gone (or by hand): resumed, its stash undone.
            owner_gone = not owner_alive(labels.get(LABEL_OWNER, ""))
            if sparse.recover(client, str(row["Id"]), resume_unmarked=owner_gone) is not None:
                state = "running"
        reason = "all owners asked for" if all_owners else reason_to_reap(
            labels, state, float(row.get("Created", now)), now
        )
        if reason is None:
            continue
        remove_container(client, str(row["Id"]))
        sparse.forget(client, str(row["Id"]))
        log.info("reaped sandbox container", session=session, container=str(row["Id"])[:12], reason=reason)
        reaped.append(Reaped(session=session, container=str(row["Id"])[:12], reason=reason))
    return reaped
