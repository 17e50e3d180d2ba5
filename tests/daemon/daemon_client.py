"""A tiny synchronous client for the sandbox daemon, and a function that starts one.

The daemon runs as a local subprocess (``python3 -m sandbox``) with a private
workspace. Every daemon carries a unique marker in its environment, which its
processes inherit, so a test can find (and fail on) processes that outlive it.
"""

import itertools
import os
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sandbox.protocol import FrameDecoder, encode_frame  # noqa: E402

MARK_VAR = "DAEMON_TEST_MARK"
# The daemon must run on Python >= 3.8: point this at another interpreter to check.
DAEMON_PYTHON = os.environ.get("CAISSON_TEST_PYTHON") or sys.executable


class CallError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class Client:
    """Sends requests, collects replies by id (they may arrive in any order)."""

    def __init__(self, proc: "subprocess.Popen[bytes]", mark: str, workspace: Path, stderr_path: Path) -> None:
        self.proc = proc
        self.mark = mark
        self.workspace = workspace
        self.stderr_path = stderr_path
        self._ids = itertools.count(1)
        self._decoder = FrameDecoder()
        self._replies: dict[int, tuple[dict[str, Any], bytes]] = {}

    def send(self, op: str, blob: bytes = b"", **args: Any) -> int:
        req_id = next(self._ids)
        self.send_raw(encode_frame({"id": req_id, "op": op, "args": args}, blob))
        return req_id

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, req_id: int, timeout: float = 30.0) -> tuple[dict[str, Any], bytes]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while req_id not in self._replies:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply to request %d" % req_id)
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            data = os.read(fd, 1 << 20)
            if not data:
                raise EOFError("daemon closed stdout; stderr:\n" + self.stderr())
            for header, blob in self._decoder.feed(data):
                self._replies[header["id"]] = (header, blob)
        return self._replies.pop(req_id)

    def result(self, req_id: int, timeout: float = 30.0) -> tuple[dict[str, Any], bytes]:
        header, blob = self.recv(req_id, timeout)
        if not header["ok"]:
            raise CallError(header["error"]["code"], header["error"]["message"])
        return header["result"], blob

    def call(self, op: str, blob: bytes = b"", **args: Any) -> tuple[dict[str, Any], bytes]:
        """One request, its result; ``args`` go to the op verbatim (``timeout`` too)."""
        return self.result(self.send(op, blob, **args))

    def error(self, op: str, blob: bytes = b"", **args: Any) -> CallError:
        """Call an op that must fail; return the error."""
        with pytest.raises(CallError) as info:
            self.call(op, blob, **args)
        return info.value

    def run(self, command: str, blob: bytes = b"", **args: Any) -> tuple[dict[str, Any], bytes, bytes]:
        """exec a shell command; returns (result, stdout, stderr)."""
        result, out = self.call("exec", blob, command=command, **args)
        return result, out[: result["stdout_len"]], out[result["stdout_len"] :]

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self, timeout: float = 10.0) -> int:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def marked_pids(mark: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``mark``."""
    needle = ("%s=%s" % (MARK_VAR, mark)).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                environ = handle.read()
            with open("/proc/%s/stat" % name, "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != b"Z":
            found.append(int(name))
    return found


def start_daemon(
    tmp_path: Path,
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    python: str | None = None,
) -> Client:
    workspace = Path((env or {}).get("CAISSON_WORKSPACE") or tmp_path / "ws")
    mark = uuid.uuid4().hex
    full_env = dict(os.environ)
    full_env.update(
        {
            "CAISSON_AGENT_USER": "root" if os.geteuid() == 0 else str(os.geteuid()),
            "CAISSON_WORKSPACE": str(workspace),
            MARK_VAR: mark,
        }
    )
    full_env.update(env or {})
    stderr_path = tmp_path / "daemon.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [python or DAEMON_PYTHON, "-m", "sandbox"],
            cwd=str(ROOT),
            env=full_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
            preexec_fn=preexec_fn,
        )
    return Client(proc, mark, workspace, stderr_path)


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
