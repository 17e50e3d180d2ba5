"""clone-exec, the daemon's native spawner and clones, and the request format its clones
share with the Python ones: both read the same requests alike, and both refuse a malformed
one before anything runs.

The native tests run the spawner compiled from this checkout on the host, as the daemon
does (its socket on descriptor 3): the test asks it for a clone, which becomes the test's
own child, and hands that clone a request. The daemon fixtures (``box``) run every
container test of this folder once with clone-exec and once without.
"""

from __future__ import annotations

import array
import contextlib
import errno
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_client import start_container_daemon

from caisson._sandbox import clone_request, seccomp
from caisson._sandbox.errors import DaemonError
from caisson._sandbox.spawner import STAGE_EXEC, STAGE_SETUP
from caisson.docker.native import CLONE_EXEC, binary

HEADER = struct.Struct("<BIIIIIII")


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = binary(CLONE_EXEC)
    assert data is not None, "clone-exec did not compile: install gcc and libc6-dev (scripts/setup.sh does)"
    path = tmp_path_factory.mktemp("clone-exec") / "clone-exec"
    path.write_bytes(data)
    path.chmod(0o755)
    return path


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """stdout and stderr for a command: read ends, then write ends."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    yield out_r, err_r, out_w, err_w
    for fd in (out_r, err_r, out_w, err_w):
        with contextlib.suppress(OSError):  # the test closed it already
            os.close(fd)


def run_clone(helper: Path, framed: bytes, fds: list[int]) -> tuple[int, bytes]:
    """Have clone-exec make a clone and hand it ``framed`` and ``fds`` as the daemon does; the
    clone's exit status and its report (empty: it exec'd the command)."""
    ours, theirs = socket.socketpair()
    spawner = subprocess.Popen(
        [str(helper)], close_fds=False, preexec_fn=lambda: os.dup2(theirs.fileno(), 3)
    )
    theirs.close()
    try:
        ours.send(b"n")
        made, ancillary, _, _ = ours.recvmsg(8, socket.CMSG_SPACE(4))
        pid, err = struct.unpack("<ii", made)
        assert err == 0, os.strerror(err)
        [(_, _, data)] = ancillary
        clone = socket.socket(fileno=array.array("i", data)[0])
    finally:
        ours.close()  # the spawner exits at end of file
        spawner.wait(timeout=10)
    with clone:
        clone.sendmsg([framed], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        report = b""
        while chunk := clone.recv(64):
            report += chunk
    _, status = os.waitpid(pid, 0)  # CLONE_PARENT: the clone is this process's child
    return os.waitstatus_to_exitcode(status), report


def frame(payload: bytes) -> bytes:
    return clone_request.LENGTH.pack(len(payload)) + payload


def test_a_request_reads_back_as_it_was_written() -> None:
    framed = clone_request.encode(
        ["printf", "%s", "ä b"], ["/usr/bin/printf"], "/tmp", {"A": "1", "B": "x=y"}, (1000, 1000, [1000, 3_000_000_001]),
        clone_request.HAS_STDIN | clone_request.HAS_CWD_FD,
    )
    request = clone_request.decode(framed[clone_request.LENGTH.size :])
    assert request.argv == [b"printf", b"%s", "ä b".encode()]
    assert request.paths == [b"/usr/bin/printf"]
    assert (request.cwd, request.env) == (b"/tmp", [b"A=1", b"B=x=y"])
    assert request.ids == (1000, 1000, [1000, 3_000_000_001])
    assert request.flags == clone_request.HAS_STDIN | clone_request.HAS_CWD_FD | clone_request.HAS_IDS


def test_a_filter_reads_back_as_it_was_written() -> None:
    framed = clone_request.encode(["true"], ["/bin/true"], "/", {}, None, 0, seccomp.METADATA_FILTER)
    request = clone_request.decode(framed[clone_request.LENGTH.size :])
    assert request.filter == seccomp.METADATA_FILTER and len(request.filter) % 8 == 0 and request.argv == [b"true"]


def test_the_native_clone_installs_the_filter_it_is_given(
    helper: Path, pipes: tuple[int, int, int, int], tmp_path: Path
) -> None:
    """The metadata filter, installed by clone-exec before exec: the command reads and writes
    its file but changes neither its mode nor its times (the Python clone is tested in a
    container, tests/daemon/test_confine.py)."""
    out_r, _, out_w, err_w = pipes
    target = tmp_path / "f"
    target.write_text("x")
    before = target.stat()
    script = f"echo more >> {target}; chmod 777 {target}; echo $?; touch -d 2000-01-01 {target}; echo $?; cat {target}"
    framed = clone_request.encode(["sh", "-c", script], ["/bin/sh"], "/", {"PATH": "/usr/bin:/bin"}, None, 0,
                                  seccomp.METADATA_FILTER)
    code, report = run_clone(helper, framed, [out_w, err_w])
    os.close(out_w)
    os.close(err_w)
    assert (code, report) == (0, b"")
    assert os.read(out_r, 1000) == b"1\n1\nxmore\n"
    after = target.stat()
    assert (after.st_mode, after.st_mtime_ns > before.st_mtime_ns) == (before.st_mode, True)


def test_the_native_clone_runs_its_command_inside_the_root_it_is_given(
    helper: Path, pipes: tuple[int, int, int, int], tmp_path: Path
) -> None:
    """A view (views.py) is a chroot: inside an empty directory the shell is not found."""
    framed = clone_request.encode(["sh", "-c", "true"], ["/bin/sh"], "/", {}, None, 0, root=str(tmp_path))
    request = clone_request.decode(framed[clone_request.LENGTH.size :])
    assert (request.root, request.flags) == (os.fsencode(tmp_path), clone_request.HAS_ROOT)
    code, report = run_clone(helper, framed, list(pipes[2:]))
    assert (code, struct.unpack("<Bi", report)) == (127, (STAGE_EXEC, errno.ENOENT))
    # A directory descriptor would lead out of the root: refused, nothing run.
    framed = clone_request.encode(["true"], ["/bin/true"], "/", {}, None, clone_request.HAS_CWD_FD, root=str(tmp_path))
    code, report = run_clone(helper, framed, [*pipes[2:], os.open("/", os.O_RDONLY)])
    assert (code, struct.unpack("<Bi", report)) == (127, (STAGE_SETUP, errno.EINVAL))


def test_a_nul_byte_cannot_split_a_string_into_two() -> None:
    # A NUL would end a string early in this format and shift every field after it.
    for argv, env in ((["echo", "a\0--evil"], {}), (["echo"], {"A": "b\0C=d"})):
        with pytest.raises(DaemonError):
            clone_request.encode(argv, ["/bin/echo"], "/", env, None, 0)


def test_the_native_clone_runs_the_command_it_is_given(helper: Path, pipes: tuple[int, int, int, int]) -> None:
    out_r, err_r, out_w, err_w = pipes
    framed = clone_request.encode(
        ["sh", "-c", 'echo "$GREETING from $(pwd)"; echo oops >&2'], ["/nonexistent/sh", "/bin/sh"], "/tmp",
        {"GREETING": "hello", "PATH": "/usr/bin:/bin"}, None, 0,
    )
    code, report = run_clone(helper, framed, [out_w, err_w])
    os.close(out_w)
    os.close(err_w)
    assert (code, report) == (0, b"")
    assert os.read(out_r, 1000) == b"hello from /tmp\n"
    assert os.read(err_r, 1000) == b"oops\n"


def test_the_native_clone_reports_a_missing_program(helper: Path, pipes: tuple[int, int, int, int]) -> None:
    framed = clone_request.encode(["nope"], ["/nonexistent/nope"], "/", {}, None, 0)
    code, report = run_clone(helper, framed, list(pipes[2:]))
    assert code == 127
    assert struct.unpack("<Bi", report) == (STAGE_EXEC, errno.ENOENT)


def _malformed() -> dict[str, tuple[bytes, int]]:
    """Requests no daemon writes: a payload, and the number of descriptors sent beside it."""
    def strings(*items: bytes) -> bytes:
        return b"".join(item + b"\0" for item in items)

    good = strings(b"/", b"/bin/true", b"/bin/true")
    return {
        "more strings counted than sent": (HEADER.pack(0, 0, 0, 0, 3, 1, 0, 0) + good, 2),
        "no argv": (HEADER.pack(0, 0, 0, 0, 0, 1, 0, 0) + strings(b"/", b"/bin/true"), 2),
        "groups past the end": (HEADER.pack(0, 0, 0, 0xFFFFFFFF, 1, 1, 0, 0) + good, 2),
        "last string unterminated": (HEADER.pack(0, 0, 0, 0, 1, 1, 0, 0) + good[:-1], 2),
        "bytes after the last string": (HEADER.pack(0, 0, 0, 0, 1, 1, 0, 0) + good + b"x\0", 2),
        "shorter than a header": (b"\1\2\3", 2),
        "root flagged, empty": (HEADER.pack(clone_request.HAS_ROOT, 0, 0, 0, 1, 1, 0, 0) + strings(b"/", b"")
                                + good[2:], 2),
        "filter past the end": (HEADER.pack(0, 0, 0, 0, 1, 1, 0, 0xFFFF) + good, 2),
        "filter longer than the kernel takes": (HEADER.pack(0, 0, 0, 0, 1, 1, 0, 5000) + b"\0" * 40000 + good, 2),
        "stdin flagged, not sent": (HEADER.pack(clone_request.HAS_STDIN, 0, 0, 0, 1, 1, 0, 0) + good, 2),
        "a descriptor not flagged": (HEADER.pack(0, 0, 0, 0, 1, 1, 0, 0) + good, 3),
    }


@pytest.mark.parametrize("case", list(_malformed()))
def test_a_malformed_request_runs_nothing(helper: Path, pipes: tuple[int, int, int, int], case: str) -> None:
    payload, nfds = _malformed()[case]
    fds = [pipes[2], pipes[3], pipes[2]][:nfds]
    code, report = run_clone(helper, frame(payload), fds)
    assert code == 127
    assert struct.unpack("<Bi", report) == (STAGE_SETUP, errno.EINVAL)
    if not case.startswith(("stdin flagged", "a descriptor")):
        # The Python clones refuse the payload as well (they count descriptors apart).
        with pytest.raises(ValueError):
            clone_request.decode(payload)


def test_a_request_longer_than_any_daemon_sends_is_refused(helper: Path, pipes: tuple[int, int, int, int]) -> None:
    code, report = run_clone(helper, clone_request.LENGTH.pack(1 << 31) + b"\0" * 64, list(pipes[2:]))
    assert code == 127
    assert struct.unpack("<Bi", report) == (STAGE_SETUP, errno.EINVAL)


@pytest.mark.parametrize("helper", [b"\0\0\0\0 no program", b"#!/no/such/interpreter\n"])
def test_a_helper_that_cannot_run_leaves_the_python_clones_working(tmp_path: Path, helper: bytes) -> None:
    """A clone-exec of another architecture (or otherwise not runnable here): the spawner
    stays Python, and commands, confined ones and their errors, work as without it."""
    box = start_container_daemon(tmp_path, helper=helper)
    try:
        box.result(box.send("ping"), timeout=120)
        for _ in range(3):
            result, out = box.call("exec", command="echo alive; id -u; readlink /proc/self/fd/0", user="agent")
            assert (result["exit_code"], out[: result["stdout_len"]]) == (0, b"alive\n1000\n/dev/null\n")
        result, _ = box.call("exec", command="touch /workspace/x", user="agent", confine={"level": "safe"})
        assert result["exit_code"] != 0
        assert box.error("exec", argv=["no-such-program-here"]).code == "command_not_found"
    finally:
        assert box.close() == 0, box.stderr()

