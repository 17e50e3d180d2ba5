"""Sandboxes an eval left running (``--no-sandbox-cleanup``), found and removed through the
backend: by session id or container id (full, or a prefix as the engine shows it), never one
whose owner process is still running unless forced (it may be another eval's, or another
person's on a shared engine)."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from caisson.backend import Backend, SandboxRow
from caisson.config import owner_alive

# A shorter container id prefix matches too much to act on.
MIN_PREFIX = 4


class CleanupRefused(Exception):
    """The id names no sandbox, or more than one: nothing was removed."""


class Leftover(BaseModel):
    row: SandboxRow
    removed: bool
    # Why it was left in place, when it was.
    kept_because: str = ""


def owner_text(owner: str) -> str:
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"pid {pid} on {host}" if pid else (owner or "an unknown process")


def select(rows: list[SandboxRow], ident: str) -> SandboxRow:
    """The one sandbox ``ident`` names: its session id, or its container id or a prefix of it."""
    exact = [r for r in rows if ident in (r.session_id, r.id)]
    matched = exact or ([r for r in rows if r.id.startswith(ident)] if len(ident) >= MIN_PREFIX else [])
    if len(matched) == 1:
        return matched[0]
    if matched:
        raise CleanupRefused(
            f"{ident!r} matches {len(matched)} sandboxes ({', '.join(r.id[:12] for r in matched)}): give more of the id"
        )
    listed = "\n".join(f"  {r.session_id}  {r.id[:12]}  {r.state}" for r in rows) or "  (none)"
    raise CleanupRefused(
        f"no sandbox {ident!r} on this engine: give a session id or a container id (at least "
        f"{MIN_PREFIX} characters of it) of one of these:\n{listed}"
    )


async def remove_leftovers(backend: Backend, rows: list[SandboxRow], *, force: bool) -> list[Leftover]:
    """Remove each of ``rows`` whose owner is gone (all of them with ``force``), concurrently."""
    out = [
        Leftover(row=row, removed=False, kept_because=f"owner {owner_text(row.owner)} is still running")
        if owner_alive(row.owner) and not force
        else Leftover(row=row, removed=True)
        for row in rows
    ]
    async with anyio.create_task_group() as tg:
        for item in out:
            if item.removed:
                tg.start_soon(backend.remove, item.row.id)
    return out
