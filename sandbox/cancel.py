"""Cancellation: ``cancel`` kills the process tree of a request still running.

A request's worker thread registers the processes it starts under the request's id; the host
sends ``cancel`` when its caller gave up on that request (a cancelled task, an MCP
``notifications/cancelled``), so the work stops instead of running to its timeout.
"""

import signal
import threading
from typing import Any, Callable, Dict, List

from .errors import Reply
from .process import Proc
from .proctable import table

_current = threading.local()
_lock = threading.Lock()
_running: Dict[int, List[Proc]] = {}
_cancelled: Dict[int, bool] = {}


def begin(req_id: int) -> None:
    """This thread now serves ``req_id``."""
    _current.req_id = req_id


def end() -> None:
    req_id = getattr(_current, "req_id", None)
    _current.req_id = None
    with _lock:
        _running.pop(req_id, None)  # type: ignore[arg-type]
        _cancelled.pop(req_id, None)  # type: ignore[arg-type]


def track(proc: Proc) -> None:
    """Remember ``proc`` as started for the current request (killed if it is cancelled)."""
    req_id = getattr(_current, "req_id", None)
    if req_id is None:
        return
    with _lock:
        _running.setdefault(req_id, []).append(proc)
        late = _cancelled.get(req_id, False)
    if late:
        table().signal(proc, signal.SIGKILL, True)


def op_cancel(args: Dict[str, Any], blob: bytes) -> Reply:
    req_id = args["request"]
    with _lock:
        procs = list(_running.get(req_id, []))
        if req_id in _running:
            _cancelled[req_id] = True
    killed = sum(1 for proc in procs if table().signal(proc, signal.SIGKILL, True) > 0)
    return {"killed": killed}, b""
OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {"cancel": op_cancel}
