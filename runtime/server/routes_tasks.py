"""A tenant's background tasks beyond start, read, list and kill: their stdin, waiting for
their end, and any signal."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status

from caisson.server.deps import LiveSession
from caisson.server.models import SignalBody, TaskOutput, Written

router = APIRouter(tags=["tasks"])

RAW_BODY = {"requestBody": {"required": False, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}


@router.post("/sessions/{session_id}/tasks/{task_id}/stdin", openapi_extra=RAW_BODY)
async def task_write(live: LiveSession, task_id: str, request: Request, close: bool = False) -> Written:
    """The body, written to the task's stdin; ``close`` then ends its input."""
    return Written(written=await live.agent.task_write(task_id, await request.body(), close=close))


@router.post("/sessions/{session_id}/tasks/{task_id}/wait")
async def task_wait(
    live: LiveSession, task_id: str, timeout: Annotated[float, Query(ge=0, le=300)] = 30.0
) -> TaskOutput:
    """The task's end (``running`` false, with its exit) or, after ``timeout`` seconds, its
    state so far (``running`` true): call again to wait on."""
    return await live.agent.task_wait(task_id, timeout)


@router.post("/sessions/{session_id}/tasks/{task_id}/signal", status_code=status.HTTP_204_NO_CONTENT)
async def task_signal(live: LiveSession, task_id: str, body: SignalBody) -> None:
    await live.agent.task_signal(task_id, body.signal, tree=body.tree)
