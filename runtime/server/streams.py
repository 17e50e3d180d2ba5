"""Server-Sent Events of a background task's output, read by byte offset from the daemon.

Each event's id is ``<stdout offset>:<stderr offset>`` just after its data, so a client that
reconnects with it (as Last-Event-ID, or as the two query parameters) continues exactly where
it stopped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from caisson.client.primitives import SandboxClient
from caisson.errors import CaissonError

# Seconds the daemon holds a read open for new output.
POLL = 1.0


def event(kind: str, data: dict[str, Any], ident: str | None = None) -> bytes:
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def sse_task_events(
    client: SandboxClient, task_id: str, out_at: int, err_at: int, *, announce: bool = False
) -> AsyncIterator[bytes]:
    if announce:
        yield event("task", {"task_id": task_id}, f"{out_at}:{err_at}")
    while True:
        try:
            chunk = await client.task_read(task_id, stdout_offset=out_at, stderr_offset=err_at, wait=POLL)
        except CaissonError as exc:  # the status line is sent: the error becomes the last event
            yield event("error", {"error": getattr(exc, "code", "error"), "detail": str(exc)})
            return
        drained = chunk.stdout_offset == out_at and chunk.stderr_offset == err_at
        if chunk.stdout:
            yield event("stdout", {"data": chunk.stdout, "offset": out_at}, f"{chunk.stdout_offset}:{err_at}")
        if chunk.stderr:
            yield event("stderr", {"data": chunk.stderr, "offset": err_at}, f"{chunk.stdout_offset}:{chunk.stderr_offset}")
        out_at, err_at = chunk.stdout_offset, chunk.stderr_offset
        if not chunk.running and drained:
            exit_data = {"exit_code": chunk.exit_code, "signal": chunk.signal, "timed_out": chunk.timed_out}
            yield event("exit", exit_data, f"{out_at}:{err_at}")
            return
        if drained:
            # Keeps proxies from closing a quiet stream; comments are ignored by clients.
            yield b": waiting\n\n"
