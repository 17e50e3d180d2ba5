"""What the server records in the control-plane store as it answers: tool calls' audit events,
written ahead (a call's event is committed before its answer leaves the server), and the
request log (one record per API request, written after its answer).

One writer task commits both in one transaction per tick, on one worker thread: events
recorded while a commit runs wait for the next one, so concurrent calls share a transaction
and a thread hop, and the request records gathered meanwhile ride along (at the latest every
half second when no call wakes it). A call whose event the store cannot take in time is
answered 503, never as if it were audited; the events and records stay queued and are
written once the store answers again. From the store's first refusal until it takes a write
again, the events waiting and those recorded meanwhile also go, once each, to a fallback sink
(the replica's local audit log): a call that ran during an outage keeps its record on this
host even if the process dies before the store is back."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from caisson.audit import AuditEvent, AuditSink, summarise
from caisson.logs import get_logger
from caisson.server.models import RequestRecord
from caisson.server.store import Store

log = get_logger("caisson.server.audit")

# How long a call waits for its event's commit before it is answered 503.
DURABLE_WITHIN = 10.0
RETRY_EVERY = 0.5
# Request records wait at most this long for a commit when no call wakes the writer.
FLUSH_EVERY = 0.5
PRUNE_EVERY = 3600.0


class StoreUnavailable(Exception):
    """The control-plane store does not answer (503, Retry-After)."""

    retry_after = 5


@dataclass
class _Item:
    event: AuditEvent
    args: Mapping[str, Any] | None
    focus: str | None
    spilled: bool = False  # written to the fallback already


@dataclass
class _Batch:
    items: list[_Item] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)
    committed: anyio.Event = field(default_factory=anyio.Event)


class DurableAudit:
    def __init__(
        self, store: Store, request_log_days: float = 30.0, fallback: Callable[[], AuditSink] | None = None
    ) -> None:
        """``fallback`` gives the sink for an outage, asked only when one comes (the local log
        is then made: nothing of it exists while the store answers)."""
        self._store = store
        self._fallback = fallback
        self._keep = request_log_days * 86400
        self._next = _Batch()
        self._pending: dict[str, _Batch] = {}  # call id -> the batch holding its event
        self._wake = anyio.Event()
        self._failing = False  # the store refused the last write

    def record(self, event: AuditEvent, *, args: Mapping[str, Any] | None = None, focus: str | None = None) -> None:
        """The runtime's audit sink: called on the event loop as each call records its event."""
        item = _Item(event, args, focus)
        self._next.items.append(item)
        self._pending[event.call_id] = self._next
        if self._failing:
            self._spill([item])
        self._wake.set()

    def _spill(self, items: list[_Item]) -> None:
        if self._fallback is None:
            return
        for item in items:
            if not item.spilled:
                item.spilled = True
                self._fallback().record(item.event, args=item.args, focus=item.focus)

    def log_request(self, record: RequestRecord) -> None:
        """A request answered: written with the next commit (no hurry, no wake-up of its own)."""
        self._next.requests.append(record)

    async def durable(self, call_id: str) -> None:
        """Return once the call's event is committed (at once for one committed already)."""
        batch = self._pending.get(call_id)
        if batch is None:
            return
        await self._committed(batch, f"the audit store did not take call {call_id}'s event")

    async def flush(self) -> None:
        """Return once everything recorded so far is committed (the request log is read next)."""
        batch = self._next
        self._wake.set()
        await self._committed(batch, "the store did not take the request log")

    async def _committed(self, batch: _Batch, failure: str) -> None:
        with anyio.move_on_after(DURABLE_WITHIN):
            await batch.committed.wait()
            return
        raise StoreUnavailable(f"{failure} within {DURABLE_WITHIN:.0f} s; try again")

    async def run(self) -> None:
        pruned = time.monotonic()
        try:
            while True:
                with anyio.move_on_after(FLUSH_EVERY):
                    await self._wake.wait()
                self._wake = anyio.Event()
                await self._commit()
                if time.monotonic() - pruned > PRUNE_EVERY:
                    pruned = time.monotonic()
                    try:
                        await self._store.prune_requests(time.time() - self._keep)
                    except Exception:  # retried at the next hour
                        log.exception("pruning the request log failed")
        finally:
            await self.close()

    async def close(self) -> None:
        """Commit what is left (the writer has stopped, or sessions closed after it recorded
        their last events: an egress connection cut at the close), for at most DURABLE_WITHIN."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(DURABLE_WITHIN):
            await self._commit()

    async def _commit(self) -> None:
        batch, self._next = self._next, _Batch()
        items = batch.items
        while items or batch.requests:
            try:
                # Hashing and redacting the arguments runs on the statement's worker thread.
                await self._store.write(lambda: [summarise(i.event, i.args, i.focus) for i in items], batch.requests)
                self._failing = False
                break
            except Exception:  # the store is away: keep the events, try again
                log.exception("writing audit events failed; retrying", events=len(items), requests=len(batch.requests))
                # Those waiting and those recorded until it answers again go to the fallback too.
                self._failing = True
                self._spill(items + self._next.items)
                await anyio.sleep(RETRY_EVERY)
        for item in items:
            if self._pending.get(item.event.call_id) is batch:
                del self._pending[item.event.call_id]
        batch.committed.set()
