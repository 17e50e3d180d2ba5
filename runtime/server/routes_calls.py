"""What a tenant does inside one of its sessions: tool calls (policy, approvals, audit), and the
primitives beneath them, run as the session's agent user: exec, files, tar copies, background
tasks read by offset, and command output streamed as Server-Sent Events."""

from __future__ import annotations

import shlex
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import StreamingResponse

from caisson.client.models import TaskInfo
from caisson.client.primitives import CHUNK, SandboxClient
from caisson.errors import CaissonError, DaemonDied, DaemonProtocolError, OpError, SessionError
from caisson.logs import get_logger
from caisson.server import copy_in as copies
from caisson.server import reads, writes
from caisson.server.deps import Ctx, LiveSession
from caisson.server.models import (
    CallBody,
    ExecBody,
    ExecResult,
    SpawnBody,
    SpawnResult,
    TaskOutput,
    ToolResult,
    WriteResult,
)
from caisson.server.streams import sse_task_events
from caisson.server.tenancy import Live

router = APIRouter(tags=["calls"])
SESSION_ENDED = frozenset({SessionError.code, DaemonDied.code, DaemonProtocolError.code})
log = get_logger("caisson.server")

# The server holds a file read whole in memory before answering.
MAX_READ = 256 * 1024 * 1024
Path = Annotated[str, Query(min_length=1, max_length=4096, description="a container path; relative to the workdir")]
Offset = Annotated[int, Query(ge=0, le=2**62)]
RAW_BODY = {"requestBody": {"required": True, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}
BYTES_REPLY: dict[int | str, dict[str, Any]] = {200: {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}


@router.post("/sessions/{session_id}/calls")
async def call(live: LiveSession, body: CallBody, ctx: Ctx) -> ToolResult:
    started = time.perf_counter()
    result = await live.session.call(body.tool, body.args)
    ctx.metrics.call(result, time.perf_counter() - started)
    # Write-ahead: no answer leaves before the call's audit event is in the store.
    await ctx.audit.durable(result.call_id)
    if result.error is not None and result.error.code in SESSION_ENDED:
        raise SessionError(result.error.message)  # 410: the session is gone, not the call refused
    return result


@router.post("/sessions/{session_id}/exec")
async def exec_command(live: LiveSession, body: ExecBody) -> ExecResult:
    """Run a command as the agent, decided as bash's are (a dangerous one waits for the
    tenant's approvers; a refused one answers 403), confined to the level decided."""
    runner = await _decided(live, body.command, body.cwd, body.env)
    return await runner.exec(body.command, timeout=body.timeout, cwd=body.cwd, env=body.env, stdin=body.stdin)


@router.get("/sessions/{session_id}/files", response_class=Response, responses=BYTES_REPLY)
async def read_file(
    live: LiveSession, path: Path, offset: Offset = 0, length: Annotated[int, Query(ge=-1, le=MAX_READ)] = -1
) -> Response:
    """The file's bytes (or ``length`` bytes from ``offset``); a whole file over 256 MiB is
    refused (413, output_limit): read it in ranges or copy it out. A secret file, or one with
    other names, is refused (403)."""
    data = await reads.read_bytes(live, path, offset, length, max_size=MAX_READ if length == -1 else None)
    return Response(data, media_type="application/octet-stream")


@router.put("/sessions/{session_id}/files", openapi_extra=RAW_BODY)
async def write_file(
    live: LiveSession, request: Request, path: Path,
    mode: Annotated[int | None, Query(ge=0, le=0o7777)] = None,
    expected_sha256: Annotated[str | None, Query(pattern=r"^([0-9a-f]{64})?$")] = None,
) -> WriteResult:
    """Write the body to the file, atomically. Refused (403) outside the session's roots, on a
    protected path (shell start-up files, the home's dot entries and ``~/bin``, ``.git``,
    Python's site hooks, ...) or a secret file, by the name given or the one it reaches."""
    return await writes.write_file(live, path, await request.body(), expected_sha256=expected_sha256, mode=mode)


@router.post("/sessions/{session_id}/copy-in", status_code=status.HTTP_204_NO_CONTENT, openapi_extra=RAW_BODY)
async def copy_in(live: LiveSession, request: Request, dest: Path) -> None:
    """A tar stream extracted into ``dest`` as the agent's files: directories, regular files,
    symbolic links and hard links to the archive's own files (made copies), each decided as a
    file write is (one refused: 403, nothing written). All or nothing: one stopped partway
    removes what it had made."""
    await copies.copy_in(live, request.stream(), dest)


@router.get("/sessions/{session_id}/copy-out", response_class=StreamingResponse, responses=BYTES_REPLY)
async def copy_out(live: LiveSession, path: Path) -> StreamingResponse:
    """A container file or directory as a tar stream, archived as the agent user: beneath the
    workspace roots, secret files left out (a tenant is never given include_secrets)."""
    if not (await live.agent.stat(path)).exists:
        raise OpError("not_found", f"{path} does not exist in the session")
    return StreamingResponse(await _primed(live.session.copy_out(path)), media_type="application/x-tar")


@router.post("/sessions/{session_id}/tasks", status_code=status.HTTP_201_CREATED)
async def spawn(live: LiveSession, body: SpawnBody) -> SpawnResult:
    """Start a background task, decided and confined as ``exec`` is."""
    return await _spawn(live, body)


@router.get("/sessions/{session_id}/tasks")
async def list_tasks(live: LiveSession) -> list[TaskInfo]:
    return await live.agent.task_list()


@router.get("/sessions/{session_id}/tasks/{task_id}")
async def task_read(
    live: LiveSession, task_id: str, stdout_offset: Offset = 0, stderr_offset: Offset = 0,
    wait: Annotated[float, Query(ge=0, le=30)] = 0.0, max_bytes: Annotated[int, Query(ge=1, le=CHUNK)] = 1024 * 1024,
) -> TaskOutput:
    """Output from the given byte offsets on (nothing lost or repeated); ``wait`` long-polls."""
    return await live.agent.task_read(
        task_id, stdout_offset=stdout_offset, stderr_offset=stderr_offset, max_bytes=max_bytes, wait=wait
    )


@router.delete("/sessions/{session_id}/tasks/{task_id}", status_code=status.HTTP_204_NO_CONTENT)
async def task_kill(live: LiveSession, task_id: str) -> None:
    await live.agent.task_signal(task_id, "KILL")


@router.get("/sessions/{session_id}/tasks/{task_id}/stream", response_class=StreamingResponse)
async def task_stream(
    live: LiveSession, task_id: str, request: Request, stdout_offset: Offset = 0, stderr_offset: Offset = 0
) -> StreamingResponse:
    """The task's output as Server-Sent Events from the given offsets (or a Last-Event-ID of
    ``stdout:stderr``), then its exit; reconnecting where the last event left off loses and
    repeats nothing."""
    resume = request.headers.get("last-event-id", "")
    if resume.count(":") == 1 and all(p.isdigit() for p in resume.split(":")):
        stdout_offset, stderr_offset = (int(p) for p in resume.split(":"))
    await live.agent.task_read(task_id, stdout_offset=stdout_offset, stderr_offset=stderr_offset, max_bytes=1)
    return _sse(sse_task_events(live.agent, task_id, stdout_offset, stderr_offset))


@router.post("/sessions/{session_id}/exec-stream", response_class=StreamingResponse)
async def exec_stream(live: LiveSession, body: SpawnBody) -> StreamingResponse:
    """Start the command as a task and stream its output as Server-Sent Events: first a
    ``task`` event naming it, then output, then ``exit``. The task outlives a dropped
    connection (until its timeout): resume with ``GET .../tasks/{task_id}/stream``."""
    task = await _spawn(live, body)
    return _sse(sse_task_events(live.agent, task.task_id, 0, 0, announce=True))


async def _decided(live: Live, command: str | list[str], cwd: str | None, env: dict[str, str]) -> SandboxClient:
    """The client that runs a tenant's command: the policy's decision on it as on the bash
    tool's command line (an argv, quoted, is the command line bash would run it by)."""
    text = command if isinstance(command, str) else shlex.join(command)
    return await live.session.command_client("bash", text, cwd=cwd, env=env)


async def _spawn(live: Live, body: SpawnBody) -> SpawnResult:
    runner = await _decided(live, body.command, body.cwd, body.env)
    return await runner.spawn(
        body.command, cwd=body.cwd, env=body.env, timeout=body.timeout, name=body.name, stdin=body.stdin
    )


async def _primed(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` with its first piece already made, so a failure to start (a path the agent
    may not read) is answered with its status instead of breaking a started response."""
    try:
        first = await anext(chunks, b"")
    except BaseException:
        await _close(chunks)
        raise

    async def rest() -> AsyncIterator[bytes]:
        try:
            if first:
                yield first
            async for chunk in chunks:
                yield chunk
        except CaissonError as exc:  # past the status line: the client sees a cut tar stream
            log.warning("copy-out stopped", error=str(exc))
        finally:
            await _close(chunks)

    return rest()


async def _close(chunks: AsyncIterator[bytes]) -> None:
    """Run the generator's clean-up (the staged archive's removal) now, not at collection."""
    if isinstance(chunks, AsyncGenerator):
        await chunks.aclose()


def _sse(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-store"})
