"""The write-ahead audit: a tool call's event is committed to the control-plane store before
its answer leaves the server. Events recorded while a commit runs wait for the next one, so
concurrent calls share a transaction; a call whose event the store cannot take in time is
answered 503, never as if it were audited."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from caisson.audit import AuditEvent, summarise
from caisson.logs import get_logger
from caisson.server.store import Store

log = get_logger("caisson.server.audit")

# How long a call waits for its event's commit before it is answered 503 (the event stays
# queued and is written once the store answers again).
DURABLE_WITHIN = 10.0
RETRY_EVERY = 0.5


class StoreUnavailable(Exception):
    """The control-plane store does not answer (503, Retry-After)."""

    retry_after = 5


@dataclass
class _Batch:
    items: list[tuple[AuditEvent, Mapping[str, Any] | None, str | None]] = field(default_factory=list)
    committed: anyio.Event = field(default_factory=anyio.Event)


class DurableAudit:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._next = _Batch()
        self._pending: dict[str, _Batch] = {}  # call id -> the batch holding its event
        self._wake = anyio.Event()

    def add(self, event: AuditEvent, args: Mapping[str, Any] | None, focus: str | None) -> None:
        """The audit log's tee: called on the event loop as each call records its event."""
        self._next.items.append((event, args, focus))
        self._pending[event.call_id] = self._next
        self._wake.set()

    async def durable(self, call_id: str) -> None:
        """Return once the call's event is committed (at once for one committed already)."""
        batch = self._pending.get(call_id)
        if batch is None:
            return
        with anyio.move_on_after(DURABLE_WITHIN):
            await batch.committed.wait()
            return
        raise StoreUnavailable(f"the audit store did not take call {call_id}'s event within {DURABLE_WITHIN:.0f} s; try again")

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                await self._commit()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(DURABLE_WITHIN):
                await self._commit()

    async def _commit(self) -> None:
        batch, self._next = self._next, _Batch()
        if not batch.items:
            return
        # Hashing and redacting the arguments of a batch costs the event loop nothing.
        events = await anyio.to_thread.run_sync(lambda: [summarise(*item) for item in batch.items])
        while True:
            try:
                await self._store.add_audit(events)
                break
            except Exception:  # the store is away: keep the events, try again
                log.exception("writing audit events failed; retrying", events=len(events))
                await anyio.sleep(RETRY_EVERY)
        for event, _, _ in batch.items:
            if self._pending.get(event.call_id) is batch:
                del self._pending[event.call_id]
        batch.committed.set()
