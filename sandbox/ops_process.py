"""The process ops: exec (run to completion, capped output) and background tasks
(spawn, task_read, task_write, task_signal, task_wait, task_list).
"""

import contextlib
import signal
import time
from typing import Any, Callable, Dict

from . import cancel
from .errors import DaemonError, Reply
from .limits import MAX_BLOB
from .process import Proc
from .proctable import table
from .spawn import parse_spec
from .streams import Stream


def op_exec(args: Dict[str, Any], blob: bytes) -> Reply:
    spec = parse_spec(args)
    out_max, err_max = args["stdout_max"], args["stderr_max"]
    if out_max + err_max > MAX_BLOB:
        raise DaemonError("bad_request", "stdout_max + stderr_max exceeds %d" % MAX_BLOB)
    timeout = args["timeout"]
    proc = Proc(spec, Stream(out_max, ring=False), Stream(err_max, ring=False))
    table().start(proc, stdin_pipe=bool(blob), timeout=timeout)
    cancel.track(proc)
    if blob:
        with contextlib.suppress(DaemonError):  # the command did not read all of its stdin: its business
            proc.write_stdin(blob, close=True)
    with proc.cond:
        while not proc.finished:
            proc.cond.wait()
        out, err = proc.out, proc.err
        result = proc.status()
        del result["running"]
        result.update(
            stdout_len=len(out.buf),
            stdout_total=out.total,
            stderr_total=err.total,
            stdout_truncated=out.total > len(out.buf),
            stderr_truncated=err.total > len(err.buf),
            duration=round((proc.exit_t or time.monotonic()) - proc.t0, 6),
        )
        if proc.confined is not None:
            result["confined"] = proc.confined
        return result, bytes(out.buf + err.buf)


def op_spawn(args: Dict[str, Any], blob: bytes) -> Reply:
    spec = parse_spec(args)
    timeout = args["timeout"]
    output_max = args["output_max"]
    name = args["name"]
    keep_stdin = args["stdin"]  # extension: false = stdin at EOF from the start
    # "tail" (a task's newest output, for a reader that follows it) or "head" (the first
    # output_max bytes, as exec keeps them: the host runs exec this way when it moves in chunks).
    ring = args["keep"] == "tail"
    proc = Proc(spec, Stream(output_max, ring=ring), Stream(output_max, ring=ring), name)
    tbl = table()
    tbl.start(proc, stdin_pipe=keep_stdin or bool(blob), timeout=timeout)
    task_id = tbl.add_task(proc)
    if blob:
        with contextlib.suppress(DaemonError):  # exited without reading it all: the task still exists
            proc.write_stdin(blob, close=not keep_stdin)
    result: Dict[str, Any] = {"task_id": task_id, "pid": proc.pid}
    if proc.confined is not None:
        result["confined"] = proc.confined
    return result, b""


def _offset(args: Dict[str, Any], name: str, stream: Stream) -> int:
    offset = args[name]
    if offset > stream.total:
        raise DaemonError("bad_request", "%s %d is past the end of the output (%d)" % (name, offset, stream.total))
    return max(offset, stream.start)  # bytes before start were dropped


def _offsets(proc: Proc) -> Dict[str, Any]:
    return {
        "stdout_offset": proc.out.total,
        "stderr_offset": proc.err.total,
        "stdout_dropped": proc.out.start,
        "stderr_dropped": proc.err.start,
    }


def op_task_read(args: Dict[str, Any], blob: bytes) -> Reply:
    proc = table().task(args)
    max_bytes = args["max_bytes"]
    wait = args["wait"]
    out, err = proc.out, proc.err
    with proc.cond:
        pos_out = _offset(args, "stdout_offset", out)
        pos_err = _offset(args, "stderr_offset", err)
        if wait > 0:
            deadline = time.monotonic() + wait
            while not proc.finished and out.total == pos_out and err.total == pos_err:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                proc.cond.wait(remaining)
            # Bytes may have been dropped while we waited.
            pos_out = max(pos_out, out.start)
            pos_err = max(pos_err, err.start)
        avail_out = out.total - pos_out
        avail_err = err.total - pos_err
        # Share max_bytes fairly, so a chatty stdout cannot starve stderr.
        take_out, take_err = avail_out, avail_err
        if avail_out + avail_err > max_bytes:
            half = max_bytes // 2
            if avail_out <= half:
                take_err = max_bytes - avail_out
            elif avail_err <= half:
                take_out = max_bytes - avail_err
            else:
                take_out, take_err = half, max_bytes - half
        data_out = out.buf[pos_out - out.start : pos_out - out.start + take_out]
        data_err = err.buf[pos_err - err.start : pos_err - err.start + take_err]
        result = proc.status()
        result.update(
            stdout_len=len(data_out),
            stdout_offset=pos_out + take_out,
            stderr_offset=pos_err + take_err,
            stdout_dropped=out.start,
            stderr_dropped=err.start,
        )
    return result, bytes(data_out + data_err)


def op_task_wait(args: Dict[str, Any], blob: bytes) -> Reply:
    proc = table().task(args)
    timeout = args["timeout"]
    with proc.cond:
        if timeout is None:
            while not proc.finished:
                proc.cond.wait()
        else:
            deadline = time.monotonic() + timeout
            while not proc.finished:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                proc.cond.wait(remaining)
        result = proc.status()
        result.update(_offsets(proc))
    return result, b""


def op_task_write(args: Dict[str, Any], blob: bytes) -> Reply:
    proc = table().task(args)
    close = args["close"]
    return {"written": proc.write_stdin(blob, close)}, b""


def parse_signal(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isdigit():
        number = int(value)
    elif isinstance(value, str):
        name = value.upper()
        if not name.startswith("SIG"):
            name = "SIG" + name
        sig = getattr(signal.Signals, name, None) if name.isidentifier() else None
        if sig is None:
            raise DaemonError("bad_request", "unknown signal %r" % value)
        return int(sig)
    else:
        raise DaemonError("bad_request", "signal must be a name or a number")
    if not 0 < number < signal.NSIG:
        raise DaemonError("bad_request", "signal %d out of range" % number)
    return number


def op_task_signal(args: Dict[str, Any], blob: bytes) -> Reply:
    tbl = table()
    proc = tbl.task(args)
    sig = parse_signal(args["signal"])
    tree = args["tree"]
    return {"signalled": tbl.signal(proc, sig, tree) > 0}, b""


def op_task_forget(args: Dict[str, Any], blob: bytes) -> Reply:
    """Drop a task and its kept output, killing it first if it still runs."""
    tbl = table()
    proc = tbl.task(args)
    with proc.cond:
        running = not proc.finished
    if running:
        tbl.signal(proc, signal.SIGKILL, True)
    tbl.forget(proc)
    return {"killed": running}, b""


def op_task_list(args: Dict[str, Any], blob: bytes) -> Reply:
    tbl = table()
    tasks = []
    for task_id, proc in list(tbl.tasks.items()):
        with proc.cond:
            entry = {"task_id": task_id, "pid": proc.pid, "name": proc.name, "command": proc.spec.display}
            entry.update(proc.status())
            entry.update(
                started=proc.started, ended=proc.ended, stdout_total=proc.out.total, stderr_total=proc.err.total
            )
        tasks.append(entry)
    return {"tasks": tasks}, b""


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {
    "exec": op_exec,
    "spawn": op_spawn,
    "task_read": op_task_read,
    "task_write": op_task_write,
    "task_signal": op_task_signal,
    "task_wait": op_task_wait,
    "task_list": op_task_list,
    "task_forget": op_task_forget,
}
