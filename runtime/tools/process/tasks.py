"""Background tasks: task_output, task_input, task_kill, task_list.

Output stays in the daemon with byte offsets. The host remembers, per session and task,
where the agent's last read ended, so task_output returns only new output: nothing lost,
nothing repeated. After a controller reconnect the cursor starts at 0 again (the daemon
still has the output), so output may repeat but is never lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import Field

from caisson.client.models import TaskInfo, TaskOutput
from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.text import shown_name

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

READ_MAX = 100 * 1024
MAX_WAIT = 300.0
KILL_WAIT = 5.0


@dataclass
class Cursor:
    stdout: int = 0
    stderr: int = 0
    lock: anyio.Lock = field(default_factory=anyio.Lock)


def _cursor(ctx: ToolContext, task_id: str) -> Cursor:
    cursors: dict[str, Cursor] = ctx.tool_state("tasks.cursors", dict)
    return cursors.setdefault(task_id, Cursor())


def _no_such_task(task_id: str) -> ToolError:
    return ToolError("no_such_task", f"No background task {task_id!r} in this session; task_list shows them.")


def describe_status(running: bool, exit_code: int | None, signal: int | None, timed_out: bool) -> str:
    if running:
        return "running"
    if timed_out:
        return "killed after its background timeout"
    if exit_code is not None:
        return f"exited with code {exit_code}"
    return f"killed by signal {signal}" if signal is not None else "exited"


def _status_fields(out: TaskOutput | TaskInfo) -> dict[str, Any]:
    return {
        "status": "running" if out.running else "exited",
        "running": out.running,
        "exit_code": out.exit_code,
        "signal": out.signal,
        "timed_out": out.timed_out,
    }


class TaskOutputInput(ToolInput):
    task_id: str = Field(description="Id of the background task (from bash run_in_background)")
    stdout_offset: int | None = Field(
        None, ge=0, description="Read stdout from this byte offset instead of where the last read ended"
    )
    stderr_offset: int | None = Field(
        None, ge=0, description="Read stderr from this byte offset instead of where the last read ended"
    )
    wait: float = Field(0.0, ge=0, le=MAX_WAIT, description="Seconds to wait for new output or exit (long poll)")
    max_bytes: int = Field(READ_MAX, ge=1, le=8 * 1024 * 1024, description="Most bytes to return (both streams)")


@tool(
    "task_output",
    TaskOutputInput,
    level=Level.SAFE,
    access="read",
    snippet="Read new output of a background task (since the last read, or from an offset) and its status",
)
async def task_output(ctx: ToolContext, args: TaskOutputInput) -> ToolResult:
    cursor = _cursor(ctx, args.task_id)
    # Serialise reads of one task, so two concurrent reads never return the same bytes.
    async with cursor.lock:
        start_out = cursor.stdout if args.stdout_offset is None else args.stdout_offset
        start_err = cursor.stderr if args.stderr_offset is None else args.stderr_offset
        try:
            out = await ctx.client.task_read(
                args.task_id, stdout_offset=start_out, stderr_offset=start_err,
                max_bytes=args.max_bytes, wait=args.wait,
            )
        except OpError as exc:
            if exc.code == "no_such_task":
                raise _no_such_task(args.task_id) from None
            if exc.code == "bad_request" and "past the end" in exc.message:
                raise ToolError("invalid_offset", exc.message) from None
            raise
        # An explicit re-read of older output never moves the cursor backwards.
        cursor.stdout = max(cursor.stdout, out.stdout_offset)
        cursor.stderr = max(cursor.stderr, out.stderr_offset)

    lost_out = max(0, out.stdout_dropped - start_out)
    lost_err = max(0, out.stderr_dropped - start_err)
    returned = (out.stdout_offset - max(start_out, out.stdout_dropped)) + (
        out.stderr_offset - max(start_err, out.stderr_dropped)
    )
    more = returned >= args.max_bytes
    status = describe_status(out.running, out.exit_code, out.signal, out.timed_out)
    lines = [f"[Task {args.task_id}: {status}]"]
    if lost_out or lost_err:
        lines.append(f"[{lost_out + lost_err} bytes of older output were no longer kept]")
    if out.stdout:
        lines.append(out.stdout.rstrip("\n"))
    if out.stderr:
        lines.append(out.stderr.rstrip("\n"))
    if not out.stdout and not out.stderr:
        lines.append("(no new output)")
    if more:
        lines.append("[More output is available: call task_output again]")
    data = {
        "task_id": args.task_id,
        **_status_fields(out),
        "stdout": out.stdout,
        "stderr": out.stderr,
        "stdout_offset": out.stdout_offset,
        "stderr_offset": out.stderr_offset,
        "stdout_dropped": out.stdout_dropped,
        "stderr_dropped": out.stderr_dropped,
        "more": more,
    }
    return ToolResult.success("\n".join(lines), data)


class TaskInputInput(ToolInput):
    task_id: str = Field(description="Id of the background task")
    input: str = Field("", description="Text to write to the task's stdin (add a newline for line-based programs)")
    close: bool = Field(False, description="Close stdin after writing (sends end-of-file)")


@tool(
    "task_input",
    TaskInputInput,
    level=Level.DANGEROUS,
    access="execute",
    snippet="Write text to a background task's stdin, optionally closing it",
)
async def task_input(ctx: ToolContext, args: TaskInputInput) -> ToolResult:
    try:
        written = await ctx.client.task_write(args.task_id, args.input, close=args.close)
    except OpError as exc:
        if exc.code == "no_such_task":
            raise _no_such_task(args.task_id) from None
        if exc.code == "bad_request" and "closed" in exc.message:
            raise ToolError("stdin_closed", f"The stdin of task {args.task_id} is closed.") from None
        if exc.code == "io_error":
            raise ToolError("stdin_closed", f"Task {args.task_id} no longer reads its stdin: {exc.message}") from None
        raise
    text = f"Wrote {written} bytes to the stdin of task {args.task_id}" + ("; stdin closed." if args.close else ".")
    return ToolResult.success(text, {"task_id": args.task_id, "written": written, "closed": args.close})


class TaskKillInput(ToolInput):
    task_id: str = Field(description="Id of the background task")
    signal: str | int = Field("KILL", description="Signal name or number (default KILL); sent to the whole tree")


@tool(
    "task_kill",
    TaskKillInput,
    level=Level.CAUTIOUS,
    access="execute",
    snippet="Stop a background task and every process it started",
)
async def task_kill(ctx: ToolContext, args: TaskKillInput) -> ToolResult:
    try:
        await ctx.client.task_signal(args.task_id, args.signal, tree=True)
        status = await ctx.client.task_wait(args.task_id, timeout=KILL_WAIT)
    except OpError as exc:
        if exc.code == "no_such_task":
            raise _no_such_task(args.task_id) from None
        if exc.code == "bad_request":
            raise ToolError("invalid_signal", exc.message) from None
        raise
    state = describe_status(status.running, status.exit_code, status.signal, status.timed_out)
    if status.running:
        text = f"Sent {args.signal} to task {args.task_id}; it is {state}."
    else:
        text = f"Task {args.task_id} {state}."
    return ToolResult.success(text, {"task_id": args.task_id, **_status_fields(status)})


class TaskListInput(ToolInput):
    pass


@tool(
    "task_list",
    TaskListInput,
    level=Level.SAFE,
    access="read",
    snippet="List the session's background tasks (running and finished) with their status",
)
async def task_list(ctx: ToolContext, args: TaskListInput) -> ToolResult:
    tasks = await ctx.client.task_list()
    rows = []
    for t in tasks:
        command = t.name or (t.command if isinstance(t.command, str) else " ".join(t.command or []))
        rows.append(
            {
                "task_id": t.task_id,
                "pid": t.pid,
                "command": command,
                **_status_fields(t),
                "started": t.started,
                "ended": t.ended,
                "stdout_total": t.stdout_total,
                "stderr_total": t.stderr_total,
            }
        )
    if not rows:
        return ToolResult.success("No background tasks.", {"tasks": []})
    lines = [
        f"{r['task_id']}  {describe_status(r['running'], r['exit_code'], r['signal'], r['timed_out'])}"
        f"  pid {r['pid']}  {shown_name(r['command'])}"
        for r in rows
    ]
    return ToolResult.success("\n".join(lines), {"tasks": rows})
