"""The spawner: a small single-threaded process that makes the clones commands run in.

Forking the daemon itself costs milliseconds: its address space is large, other threads
run, and the child has to run Python between fork and exec. The spawner is forked once,
before the daemon starts any thread, and then only clones itself, with CLONE_PARENT: each
clone is the daemon's own child, reaped, timed out and killed by the process table as
before. A clone is made ahead of need: it starts a new session, raises its OOM score to
1000 and becomes a child subreaper, then waits on a socket for its command. The daemon
hands it the command there and the clone sets up stdio, working directory, Landlock,
groups, gid and uid, and runs exec; so the daemon's wait for a command is the exec alone.

Where the image carries clone-exec (a small static program built from clone_exec.c), the
spawner execs it at once: it then clones a process of a few pages, not a copy of the
daemon's interpreter, and each clone sets its command up in native code, so the daemon's
wait for a command is one short execve. Without it (no C compiler on the host that made
the image, or another architecture) the same steps run in Python. Where the kernel ignores
CLONE_PARENT (gVisor) the daemon makes the clones itself: clone-exec started with
posix_spawn (a vfork, nothing of the daemon copied), made ahead like the spawner's, or
without clone-exec a fork of the daemon at each command.

Daemon to spawner: one byte, "make the next clone". Spawner to daemon: the clone's pid and
errno (0: made), and the daemon's end of the clone's socket as SCM_RIGHTS. Daemon to a
clone: a request (clone_request.py) with the command's descriptors. A clone to the daemon:
nothing (end of file when exec closed the socket), or the stage that failed and its errno.
"""

import array
import contextlib
import errno
import fcntl
import gc
import itertools
import os
import resource
import signal
import socket
import struct
from typing import Dict, List, Optional, Tuple

from . import clone_request, landlock, own_clones, seccomp, syscalls
from .errors import DaemonError, from_oserror
from .limits import COMMAND_NICE, PROCESSES
from .own_clones import CLONE_EXEC, CLONE_EXEC_SOCKET, DEFAULT_SIGNALS, HAS_CLONE_EXEC
from .spawn import Spec

_MADE = struct.Struct("<ii")  # a clone's pid, errno
_FAILURE = struct.Struct("<Bi")  # stage, errno: what a clone writes before exiting
MAX_FDS = 5
# Clones kept made ahead, once the session runs commands, by making them after each reply.
# Making one (a fork, then the clone's own set-up) takes a core for about half a millisecond:
# made while the host reads a reply, it does not compete with the next command, which takes
# the older clone. An idle session keeps one.
AHEAD = 2


# Marker groups: far above any group an image defines.
MARKER_BASE = 3_000_000_000

STAGE_SETUP, STAGE_CHDIR, STAGE_CONFINE, STAGE_CREDS, STAGE_EXEC = range(1, 6)
# The flags of a request's optional descriptors, in the order they travel.
_OPTIONAL_FLAGS = (clone_request.HAS_STDIN, clone_request.HAS_RULESET, clone_request.HAS_CWD_FD)


def exec_paths(spec: Spec) -> List[str]:
    """Where to look for the program, in order, as execvpe would (PATH of the command's env)."""
    if spec.executable is not None:
        return [spec.executable]
    name = spec.argv[0]
    if "/" in name:
        return [name]
    return [os.path.join(d, name) for d in os.get_exec_path(spec.env)]


def command_filter(spec: Spec) -> bytes:
    """The seccomp program the command runs under: no metadata changes where its confinement
    allows none, and no internet sockets where the session has no network and Landlock has no
    TCP rule to keep it off loopback (gVisor); see ``seccomp``."""
    confine = spec.confine
    if confine is None:
        return b""
    metadata = not confine.metadata
    inet = not confine.network and not confine.egress_port and landlock.abi() < landlock.TCP_ABI
    program = seccomp.program(metadata, inet)
    if metadata and not program:
        raise DaemonError(
            "permission_denied", "no seccomp filter for %s: cannot run a command at level safe" % os.uname().machine
        )
    return program


def credentials(spec: Spec, marker: Optional[int] = None) -> Optional[Tuple[int, int, List[int]]]:
    """The ids the clone takes (None: it keeps the daemon's); ``marker`` joins the groups."""
    euid = os.geteuid()
    user = spec.user
    if euid == 0:
        return user.uid, user.gid, list(user.groups) + ([marker] if marker is not None else [])
    if user.uid != euid:
        raise DaemonError("permission_denied", "the daemon (uid %d) cannot run commands as uid %d" % (euid, user.uid))
    return None


def failure(spec: Spec, stage: int, err: int) -> DaemonError:
    """The daemon error for a clone that failed at ``stage`` with ``err``."""
    if stage == STAGE_CHDIR:
        return DaemonError("cwd_not_found", "cwd is not a directory: %s" % spec.cwd)
    if stage in (STAGE_CONFINE, STAGE_CREDS):
        what = "confined " if spec.confine is not None else ""
        return DaemonError(
            "permission_denied", "cannot run %sas user %s (uid %d)" % (what, spec.user.name, spec.user.uid)
        )
    if stage == STAGE_EXEC and err == errno.ENOENT:
        return DaemonError("command_not_found", "no such command: %s" % spec.argv[0])
    if stage == STAGE_EXEC and err in (errno.EACCES, errno.ENOEXEC, errno.EISDIR):
        return DaemonError("not_executable", "not an executable file: %s" % spec.argv[0])
    return from_oserror(OSError(err, os.strerror(err), spec.argv[0]))


class Spawner:
    """The daemon's end: starts the spawner process and runs commands in its clones."""

    def __init__(self, own_clones_only: bool = False) -> None:
        """``own_clones_only``: the host says the kernel ignores CLONE_PARENT (gVisor), so no
        spawner process is started to find that out (a fork of the daemon's interpreter took
        15-25 ms there, on every session's start)."""
        self._sock: Optional[socket.socket] = None
        self._requested = 0  # clones asked of the spawner and not yet taken
        self._used = False
        # Where the kernel keeps no orphan below its command (gVisor: no CLONE_PARENT, no
        # subreaper), each command's processes carry a group of their own instead: only a
        # privileged process can drop a supplementary group, so setsid and double forks
        # cannot shed it, and a tree kill finds them all by it.
        self.marks = False
        self._markers = itertools.count(MARKER_BASE)
        # Clones the daemon starts itself, made ahead.
        self._ahead = own_clones.Ahead()
        # The spawner's first clone, taken by ``probe`` before any command asked for it.
        self._early: Optional[Tuple[int, socket.socket]] = None
        if own_clones_only:
            self.marks = True
        else:
            self._start()

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        daemon = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                _serve(theirs, daemon)
            finally:
                os._exit(0)
        theirs.close()
        self._sock = ours
        self._requested = 0  # clones asked for and not yet taken
        self._used = False
        self.refill(1)  # the first clone, made while the daemon starts

    def spawn(
        self, spec: Spec, stdin: int, stdout: int, stderr: int, ruleset: int, root: Optional[str] = None
    ) -> Tuple[int, Optional[int]]:
        """Start ``spec`` with these descriptors (``root``: a view to chroot into, see
        ``views``); its pid, and the marker group its processes carry (None where the tree
        is kept by the kernel). The caller holds the spawn lock (one request at a time, and
        the reaper cannot reap the pid before it is recorded)."""
        if root is not None and spec.cwd_fd >= 0:
            raise DaemonError("bad_request", "a command in a view starts from its path, not a descriptor")
        optional = (stdin, ruleset, spec.cwd_fd)
        fds = array.array("i", [stdout, stderr] + [fd for fd in optional if fd >= 0])
        given = sum(_OPTIONAL_FLAGS[i] for i, fd in enumerate(optional) if fd >= 0)
        for attempt in (0, 1):
            pid, clone = self._take()
            marker = next(self._markers) if self.marks and os.geteuid() == 0 else None
            data = clone_request.encode(
                spec.argv, exec_paths(spec), spec.cwd, spec.env, credentials(spec, marker), given,
                command_filter(spec), root or "",
            )
            try:
                sent = clone.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], socket.MSG_NOSIGNAL)
                if sent < len(data):
                    clone.sendall(data[sent:], socket.MSG_NOSIGNAL)
                report = _recv_upto(clone, _FAILURE.size)  # end of file: exec closed the socket
            except OSError:
                if attempt:
                    raise
                continue  # this clone died before its command (nothing ran): take the next
            finally:
                clone.close()
            if report:
                raise failure(spec, *_FAILURE.unpack(report))
            return pid, marker
        raise AssertionError("unreachable")

    def replenish(self) -> None:
        """After a reply: AHEAD clones made or on their way once a command has run, else one.
        The caller holds the spawn lock."""
        self.refill(AHEAD if self._used else 1)

    def refill(self, ahead: int) -> None:
        """Ask the spawner for clones until ``ahead`` are made or on their way (where the
        daemon starts them itself, native ones only: a fork of the daemon made ahead would
        copy its memory for nothing). The caller holds the spawn lock."""
        while self._sock is not None and self._requested < ahead:
            self._sock.send(b"n")
            self._requested += 1
        if self.marks and HAS_CLONE_EXEC:
            self._ahead.keep(ahead)

    def probe(self) -> None:
        """Learn now, not at the first command, whether the kernel honours CLONE_PARENT: where
        it does not (gVisor), the clones are then made ahead from the start, so the first
        command finds one ready. The caller holds the spawn lock."""
        if self._sock is None:
            if self.marks:
                self.refill(1)
            return
        if self._early is not None:
            return
        used = self._used
        clone = self._take()
        self._used = used  # no command ran yet: an idle session keeps one clone
        if self.marks:
            self._ahead.put(clone)
            self.refill(1)
        else:
            self._early = clone

    def _take(self) -> Tuple[int, socket.socket]:
        """The oldest clone made ahead; asks for the next one at once only if none is left
        (see AHEAD). Restarts a spawner that died."""
        if self._early is not None:
            early, self._early = self._early, None
            return early
        for attempt in (0, 1):
            sock = self._sock
            if sock is None:
                self._used = True
                return self._ahead.take() or _own_clone()
            fds: List[int] = []
            try:
                data, ancillary, _flags, _addr = sock.recvmsg(
                    _MADE.size, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC
                )
                fds = _fds_of(ancillary)
                if len(data) < _MADE.size:
                    raise EOFError("the spawner is gone")
                self._requested -= 1
                self._used = True
                self.refill(1)  # one is always on its way: the next take never waits for a request
            except (OSError, EOFError):
                for fd in fds:
                    os.close(fd)
                if attempt:
                    raise DaemonError("internal", "cannot start the spawner process") from None
                # Killed, or out of memory: nothing was started, so start another.
                sock.close()
                self._start()
                continue
            pid, err = _MADE.unpack(data)
            if err == errno.ENOSYS:
                # This kernel (gVisor) ignores CLONE_PARENT: from now on the daemon forks each
                # clone itself, slower but the same clone.
                sock.close()
                self._sock = None
                self.marks = True
                return _own_clone()
            if err:
                for fd in fds:
                    os.close(fd)
                raise OSError(err, os.strerror(err))
            return pid, socket.socket(fileno=fds[0])
        raise AssertionError("unreachable")


def _own_clone() -> Tuple[int, socket.socket]:
    """A clone the daemon makes itself (where the spawner cannot make the daemon's children)."""
    return own_clones.spawn_clone() if HAS_CLONE_EXEC else _fork_clone()


def _fork_clone() -> Tuple[int, socket.socket]:
    """A Python clone forked by the daemon itself (no clone-exec in the image)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        ours.close()
        _child(theirs, _shed_daemon(theirs.fileno()), PROCESSES)
    theirs.close()
    return pid, ours


def _fds_of(ancillary: List[Tuple[int, int, bytes]]) -> List[int]:
    fds = array.array("i")
    for level, kind, item in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(item[: len(item) - len(item) % fds.itemsize])
    return list(fds)


def _recv_upto(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes, or fewer if the peer closes first."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


# ---------------------------------------------------------------- the spawner process


def _serve(sock: socket.socket, daemon: int) -> None:
    syscalls.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != daemon:
        return
    devnull = _shed_daemon(sock.fileno())
    if HAS_CLONE_EXEC:
        _become_clone_exec(sock)
    while sock.recv(1):
        try:
            pid, theirs = _prepare(devnull)
        except OSError as exc:
            sock.sendall(_MADE.pack(0, exc.errno or errno.EAGAIN))
            continue
        try:
            sock.sendmsg([_MADE.pack(pid, 0)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [theirs.fileno()]))])
        finally:
            theirs.close()




def _shed_daemon(keep: int) -> int:
    """In a fork of the daemon: drop its descriptors (but ``keep``) and signal handlers; a
    /dev/null descriptor."""
    gc.disable()  # objects inherited from the daemon may own descriptors closed below
    for signum in DEFAULT_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    for name in os.listdir("/proc/self/fd"):  # the daemon's channel and files are not ours
        fd = int(name)
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        # Above the descriptor clone-exec's socket takes, which _become_clone_exec overwrites
        # (and closes again where the exec fails).
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, CLONE_EXEC_SOCKET + 1)
    finally:
        os.close(fd)


def _receive(sock: socket.socket) -> Tuple[bytes, List[int]]:
    """One request (its payload) and its descriptors."""
    data, ancillary, _flags, _addr = sock.recvmsg(65536, socket.CMSG_SPACE(MAX_FDS * 4))
    if not data:
        raise EOFError("peer gone")
    fds = _fds_of(ancillary)
    size = clone_request.LENGTH.size
    while len(data) < size or len(data) < clone_request.LENGTH.unpack_from(data)[0] + size:
        chunk = sock.recv(65536)  # one request per clone: nothing follows it
        if not chunk:
            raise EOFError("peer gone")
        data += chunk
    return data[size:], fds


def _prepare(devnull: int) -> Tuple[int, socket.socket]:
    """A clone (the daemon's child) waiting for its command, and the end to hand it over."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = syscalls.clone_parent()
    if pid == 0:
        theirs.close()
        _child(ours, devnull)
    ours.close()
    if pid < 0:
        theirs.close()
        raise OSError(-pid, os.strerror(-pid))
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return pid, theirs  # the daemon's child, as asked
    theirs.close()  # ours: CLONE_PARENT was ignored
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise OSError(errno.ENOSYS, "CLONE_PARENT is not supported here")


# A request as a clone receives one: what ``_rehearse`` goes through. Its program can never
# exist (below a device, whatever an agent creates): the clone still runs as root here.
_SAMPLE = clone_request.encode(["true"], ["/dev/null/true"], "/", {"PATH": "/usr/bin:/bin", "HOME": "/"}, None, 0)


def _rehearse(devnull: int) -> None:
    """Go through a command's set-up once while nobody waits: the first write to each page of
    the interpreter's memory copies it (the clone shares the spawner's), and those copies are
    then made here rather than between the daemon's request and the exec."""
    request = clone_request.decode(_SAMPLE[clone_request.LENGTH.size :])
    os.chdir(request.cwd)
    os.dup2(devnull, 0)
    env = _environ(request.env)
    for path in request.paths:
        with contextlib.suppress(OSError):  # always raised: the sample's program cannot exist
            os.execve(path, request.argv, env)


def _environ(entries: List[bytes]) -> Dict[bytes, bytes]:
    return {name: value for name, _, value in (entry.partition(b"=") for entry in entries)}


def _become_clone_exec(sock: socket.socket) -> None:
    """Exec clone-exec, the native spawner, with the daemon's socket as its descriptor 3;
    returns only if it cannot run here (then the spawner goes on in Python)."""
    fd = sock.fileno()
    if fd == CLONE_EXEC_SOCKET:
        os.set_inheritable(fd, True)
    else:
        os.dup2(fd, CLONE_EXEC_SOCKET)  # the copy is inherited; the original closes on exec
    try:
        os.execve(CLONE_EXEC, [CLONE_EXEC], {})
    except OSError:
        if fd != CLONE_EXEC_SOCKET:
            os.close(CLONE_EXEC_SOCKET)
        else:
            os.set_inheritable(fd, False)


def _child(sock: socket.socket, devnull: int, processes: int = 0) -> None:
    """In the clone: what needs no request first, then wait for the command, set it up and
    exec it, or report the failing stage (``processes``: the RLIMIT_NPROC of a command not
    run as root, see ``pidwatch``; 0: none). Never returns."""
    stage, err = STAGE_SETUP, errno.EINVAL
    try:
        os.setsid()
        # The OOM killer's first choice is agent work, never the daemon (raising one's own
        # score needs no privilege; the file may be missing in some sandboxes).
        try:
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(fd, b"1000")
            os.close(fd)
        except OSError:
            pass
        syscalls.set_subreaper()
        _rehearse(devnull)
        try:
            data, fds = _receive(sock)
        except (OSError, EOFError):
            os._exit(0)  # the daemon is gone, or made this clone for nothing
        request = clone_request.decode(data)
        if len(fds) != 2 + sum(1 for flag in _OPTIONAL_FLAGS if request.flags & flag):
            raise OSError(errno.EINVAL, "descriptors do not match the request")
        optional = iter(fds[2:])
        stdin, ruleset, cwd_fd = (next(optional) if request.flags & flag else -1 for flag in _OPTIONAL_FLAGS)
        if request.root:
            stage = STAGE_CONFINE
            if cwd_fd >= 0:
                raise OSError(errno.EINVAL, "a directory descriptor would lead out of the view")
            os.chroot(request.root)  # the command never holds CAP_SYS_CHROOT: it stays inside
        stage = STAGE_CHDIR
        if cwd_fd >= 0:
            os.fchdir(cwd_fd)
        else:
            os.chdir(request.cwd)
        stage = STAGE_SETUP
        os.dup2(stdin if stdin >= 0 else devnull, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            if fd != ruleset:
                os.close(fd)
        with contextlib.suppress(OSError):  # a priority, not a boundary: best effort
            os.setpriority(os.PRIO_PROCESS, 0, COMMAND_NICE)
        if ruleset >= 0:
            stage = STAGE_CONFINE
            landlock.restrict_self(ruleset)  # before the ids change: none of it runs unconfined
            os.close(ruleset)
        if request.filter:
            stage = STAGE_CONFINE
            seccomp.install(request.filter)
        if request.ids is not None:
            stage = STAGE_CREDS
            uid, gid, groups = request.ids
            if processes and uid != 0:  # set as root: the agent cannot raise it again
                resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
        stage, saved = STAGE_EXEC, 0
        err = errno.ENOENT
        env = _environ(request.env)
        for path in request.paths:  # as execvpe: the first error other than "not there" wins
            try:
                os.execve(path, request.argv, env)
            except OSError as exc:
                err = exc.errno or errno.EINVAL
                if not saved and err not in (errno.ENOENT, errno.ENOTDIR):
                    saved = err
        err = saved or err
    except OSError as exc:
        err = exc.errno or errno.EINVAL
    except ValueError:  # a malformed request
        err = errno.EINVAL
    finally:
        try:
            sock.send(_FAILURE.pack(stage, err))
        finally:
            os._exit(127)
