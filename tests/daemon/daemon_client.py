"""A tiny synchronous client for the sandbox daemon, and a function that starts one.

The daemon runs as a local subprocess (``python3 -m sandbox``) with a private
workspace. Every daemon carries a unique marker in its environment, which its
processes inherit, so a test can find (and fail on) processes that outlive it.
"""

import itertools
import os
import select
import shutil
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

from caisson._sandbox.protocol import FrameDecoder, encode_frame  # noqa: E402
from caisson.docker.native import CLONE_EXEC, binary  # noqa: E402

MARK_VAR = "DAEMON_TEST_MARK"
# The daemon must run on Python >= 3.8: point this at another interpreter to check.
DAEMON_PYTHON = os.environ.get("CAISSON_TEST_PYTHON") or sys.executable


class CallError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
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
        self.container = ""  # the container's name when the daemon runs in one

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
                raise TimeoutError(f"no reply to request {req_id}")
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
    needle = (f"{MARK_VAR}={mark}").encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
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


# The hardening a session container gets (runtime/docker/containers.py), repeated here so
# that the daemon tests do not depend on the host package.
CONTAINER_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]


def sandbox_image() -> str:
    """The image container tests use: CAISSON_TEST_IMAGE, else the newest caisson/sandbox tag.

    Fails (never skips) when no Docker engine answers or no image is there.
    """
    image = os.environ.get("CAISSON_TEST_IMAGE")
    if image:
        return image
    try:
        out = subprocess.run(
            ["docker", "images", "--format", "{{.CreatedAt}}\t{{.Repository}}:{{.Tag}}", "caisson/sandbox"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"container tests need a Docker engine (run scripts/setup.sh): {exc}")
    tags = sorted(line.split("\t") for line in out.splitlines() if line.strip())
    if not tags:
        pytest.fail("no caisson/sandbox image: build it with `caisson image build` (scripts/setup.sh)")
    return tags[-1][1]


def start_container_daemon(
    tmp_path: Path,
    env: dict[str, str] | None = None,
    name: str | None = None,
    *,
    clone_exec: bool = True,
    helper: bytes | None = None,
) -> Client:
    """The daemon of this checkout as PID 2 of a hardened container of the sandbox image.

    The checkout's ``sandbox`` package is mounted over the image's copy, so the code under
    test is the working tree's, with clone-exec compiled from its source (``clone_exec``
    False: without it, so clones work in Python; ``helper``: these bytes in its place). The
    container is removed when the daemon exits.
    """
    mark = uuid.uuid4().hex
    name = name or "caisson-daemon-test-" + mark[:12]
    argv = ["docker", "run", "-i", "--rm", "--init", "--name", name, "--user", "0", "--workdir", "/"]
    argv += ["--cap-drop", "ALL"] + [f"--cap-add={cap}" for cap in CONTAINER_CAPS]
    argv += ["--security-opt", "no-new-privileges:true", "--network", "none", "--log-driver", "none"]
    package = tmp_path / f"sandbox-{mark[:12]}"  # a copy: the checkout's folder has no room for the helper
    shutil.copytree(ROOT / "sandbox", package, ignore=shutil.ignore_patterns("__pycache__"))
    if clone_exec:
        helper = helper if helper is not None else binary(CLONE_EXEC)
        assert helper is not None, "clone-exec did not compile: install gcc and libc6-dev (scripts/setup.sh does)"
        (package / "clone-exec").write_bytes(helper)
        (package / "clone-exec").chmod(0o755)
    argv += ["--pids-limit", "512", "-v", f"{package}:/opt/caisson/sandbox:ro"]
    full_env = {
        "PYTHONPATH": "/opt/caisson",
        "PYTHONDONTWRITEBYTECODE": "1",
        "CAISSON_AGENT_USER": "agent",
        "CAISSON_WORKSPACE": "/workspace",
        MARK_VAR: mark,
    }
    full_env.update(env or {})
    for key, value in full_env.items():
        argv += ["-e", f"{key}={value}"]
    argv += [sandbox_image(), "python3", "-m", "sandbox"]
    stderr_path = tmp_path / "daemon.stderr"
    with open(stderr_path, "wb") as stderr:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        except OSError as exc:
            pytest.fail(f"container tests need the docker CLI: {exc}")
    client = Client(proc, mark, Path("/workspace"), stderr_path)
    client.container = name
    return client


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def as_root(box: Client, command: str) -> bytes:
    """Run a set-up command as root (unconfined); its stdout."""
    result, out, err = box.run(command, user="root")
    assert result["exit_code"] == 0, err
    return out
