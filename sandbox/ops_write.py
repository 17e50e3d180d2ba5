"""The write op: atomic (a temporary file next to the target, renamed over it), optionally
compare-and-swap guarded by the SHA-256 of the current content, in one request or as a
chunked upload.

Readers see the old content or the new, never a mix. Nothing is flushed to disk (no fsync,
most of a small write's cost): a session's files live no longer than its host does.

The target is resolved once (symbolic links in its last component followed, beneath
the request's roots and with its credentials, see ``fsaccess``); the staging file is
created, and renamed over the target, inside that directory's descriptor.

A ``plain`` write is one the host's policy decided on the path as given, without looking
first: it is refused (``not_plain``, nothing written or made) unless that path is the real
one: its parent directory there already, no symbolic link on the way, the file's only name.
``keep_old`` returns the content it replaced, so such a write is the tool's only round trip.
"""

import contextlib
import hashlib
import os
import stat
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .errors import DaemonError, NotPlain, Reply
from .fsaccess import fs_access
from .fscommon import abspath, not_plain_because, owner_ids, sha256_fd
from .fscreds import current
from .ops_dirs import make_dir, plain_parent
from .pathres import Resolver, entry_path
from .syscalls import RENAME_EXCHANGE, renameat2

# Staging files of uploads that saw no chunk for this long are deleted.
UPLOAD_IDLE = 600.0
_HEX = frozenset("0123456789abcdef")


class _PathLocks:
    """One lock per canonical path, created on demand, dropped when unused."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: Dict[str, List[Any]] = {}

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            entry = self._locks.get(key)
            if entry is None:
                entry = self._locks[key] = [threading.Lock(), 0]
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]


_path_locks = _PathLocks()


def _resolve_target(
    res: Resolver, path: str, parents: bool, dir_owner: Optional[Tuple[int, int]], plain: bool
) -> Tuple[int, str]:
    """The target's directory (open) and name; missing parents created when allowed."""

    def opened() -> Tuple[int, str]:
        try:
            return res.parent(path, follow=not plain)
        except FileNotFoundError:
            head = os.path.dirname(path.rstrip("/"))
            if plain:
                # Making it could go through a link before anything is checked: the host looks first.
                raise NotPlain(path, "needs its parent directory made") from None
            if not parents:
                raise DaemonError("not_found", "parent directory does not exist: %s" % head) from None
            make_dir(res, head, 0o755, dir_owner, parents=True)
            return res.parent(path, follow=True)

    return plain_parent(path, plain, opened)


class _Staging:
    """A temporary file next to the target that receives the new content."""

    def __init__(self, path: str, plain: bool) -> None:
        self.path = path  # as requested
        self.plain = plain
        self.dirfd = -1  # the target's directory, once resolved
        self.name = ""  # the target's name in it
        self.fd = -1
        self.tmp = ""
        self.digest = hashlib.sha256()
        self.size = 0
        self.lock = threading.Lock()  # orders chunks of one upload
        self.touched = time.monotonic()
        self.done = False  # committed or discarded: a late chunk must not start a new file

    @property
    def key(self) -> str:
        return entry_path(self.dirfd, self.name)

    def append(self, res: Resolver, data: bytes, parents: bool, dir_owner: Optional[Tuple[int, int]]) -> None:
        if self.done:
            raise DaemonError("bad_request", "upload already finished or failed: %s" % self.path)
        if self.dirfd < 0:
            self.dirfd, self.name = _resolve_target(res, self.path, parents, dir_owner, self.plain)
        if self.fd < 0:
            base = "." + self.name[:96] + "."
            for _ in range(100):
                tmp = base + os.urandom(6).hex() + ".caisson-tmp"
                try:
                    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                    self.fd = os.open(tmp, flags, 0o600, dir_fd=self.dirfd)
                except FileExistsError:
                    continue
                self.tmp = tmp
                break
            else:
                raise DaemonError("io_error", "cannot create a temporary file next to %s" % self.path)
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.digest.update(data)
        self.size += len(data)
        self.touched = time.monotonic()

    def discard(self) -> None:
        self.done = True
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.tmp:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp, dir_fd=self.dirfd)
            self.tmp = ""
        self.close_dir()

    def close_dir(self) -> None:
        if self.dirfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.dirfd)
            self.dirfd = -1


_uploads: Dict[str, _Staging] = {}
_uploads_lock = threading.Lock()


def _existing(staging: _Staging) -> Optional[os.stat_result]:
    try:
        st = os.stat(staging.name, dir_fd=staging.dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        if staging.plain:
            raise NotPlain(staging.path, "is a symbolic link")
        # It was no link when resolved: someone swapped it meanwhile.
        raise DaemonError("conflict", "file was replaced by a symbolic link while writing: %s" % staging.path)
    if stat.S_ISDIR(st.st_mode):
        raise DaemonError("is_a_directory", "is a directory: %s" % staging.path)
    why = not_plain_because(st) if staging.plain else ""
    if why:
        raise NotPlain(staging.path, why)
    return st


def _check_expected(path: str, existing: bool, expected: Optional[str]) -> None:
    if expected is None:
        return
    if expected == "":
        if existing:
            raise DaemonError("conflict", "file exists but was expected not to: %s" % path)
        return
    if not existing:
        raise DaemonError("conflict", "file does not exist but was expected to: %s" % path)


def _current(staging: _Staging, keep: int) -> Tuple[str, Optional[bytes]]:
    """The current content's SHA-256, and the content itself when no larger than ``keep``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(staging.name, flags, dir_fd=staging.dirfd)
    try:
        if os.fstat(fd).st_size > keep:
            return sha256_fd(fd), None
        parts = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            parts.append(chunk)
        data = b"".join(parts)
        return hashlib.sha256(data).hexdigest(), data
    finally:
        os.close(fd)


def _commit(
    staging: _Staging, mode: int, owner: Optional[Tuple[int, int]], expected: Optional[str], keep_old: int
) -> Reply:
    """Compare-and-swap the staged content into place; the caller discards ``staging`` on failure.
    With ``keep_old`` (>= 0) the reply also tells what was replaced: ``old_sha256`` ("" when
    nothing was) and, when it was no larger than ``keep_old``, its content as the blob (``old_kept``)."""
    old: Dict[str, Any] = {}
    blob = b""
    with _path_locks.hold(staging.key):
        existing = _existing(staging)
        _check_expected(staging.path, existing is not None, expected)
        digest = None
        if existing is not None and (expected or keep_old >= 0):
            digest, data = _current(staging, keep_old)
            if keep_old >= 0:
                old = {"old_sha256": digest, "old_kept": data is not None}
                blob = data or b""
        elif keep_old >= 0:
            old = {"old_sha256": "", "old_kept": False}
        if expected and digest != expected:
            raise DaemonError("conflict", "file changed (sha256 differs): %s" % staging.path)
        if existing is not None and current() is not None:
            # Replacing is a rename (the directory's permission), but writing a file needs the
            # file's: an agent may not rewrite a read-only file it could not open for writing.
            flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            os.close(os.open(staging.name, flags, dir_fd=staging.dirfd))
        if existing is not None:
            # Replace the file, not its identity: same mode and owner as before.
            mode = stat.S_IMODE(existing.st_mode)
            owner = (existing.st_uid, existing.st_gid)
        if current() is not None:
            owner = None  # acting as a user: the file is theirs, they cannot give it away
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            try:
                os.fchown(staging.fd, owner[0], owner[1])
            except PermissionError:
                if os.geteuid() == 0:
                    raise
                # Unprivileged daemon: cannot give files away; keep ours.
        os.fchmod(staging.fd, mode)  # after fchown, which clears set-id bits
        os.close(staging.fd)
        staging.fd = -1
        _put_in_place(staging, existing is not None)
        staging.tmp = ""
        staging.done = True
        staging.close_dir()
    return {"created": existing is None, "size": staging.size, "sha256": staging.digest.hexdigest(), **old}, blob


def _put_in_place(staging: _Staging, replacing: bool) -> None:
    """Rename the staged file over the target. Replacing a file, exchange the two and unlink
    the old one: a plain rename over a file makes ext4 start writing the new data out at
    once (its guard for programs that skip fsync), most of a small write's cost."""
    tmp, name, dirfd = staging.tmp, staging.name, staging.dirfd
    if not replacing or renameat2 is None or renameat2(dirfd, tmp, dirfd, name, RENAME_EXCHANGE):
        # Nothing to replace, or no exchange here (gVisor, old libc), or the target went away.
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        return
    old = os.stat(tmp, dir_fd=dirfd, follow_symlinks=False)
    if not stat.S_ISREG(old.st_mode):
        # Someone put a directory or a link there since it was checked: give it back.
        renameat2(dirfd, tmp, dirfd, name, RENAME_EXCHANGE)
        raise DaemonError("conflict", "file was replaced while writing: %s" % staging.path)
    os.unlink(tmp, dir_fd=dirfd)


def op_write(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    mode = args["mode"]
    parents = args["parents"]
    expected = args["expected_sha256"]
    if expected is not None and expected != "" and (len(expected) != 64 or not _HEX.issuperset(expected)):
        raise DaemonError("bad_request", "expected_sha256 must be null, \"\" or 64 lowercase hex digits")
    upload = args["upload"]
    final = upload is None if args["final"] is None else args["final"]
    owner = owner_ids(args)
    plain = args["plain"]
    keep_old = args["keep_old"]
    with fs_access(args) as res:
        if upload is None:
            staging = _Staging(path, plain)
        else:
            with _uploads_lock:
                _expire_uploads()
                found = _uploads.get(upload)
                if found is None:
                    found = _uploads[upload] = _Staging(path, plain)
                elif found.path != path or found.plain != plain:
                    raise DaemonError("bad_request", "upload %r is for %s, not %s" % (upload, found.path, path))
                staging = found
                if final:
                    del _uploads[upload]
        with staging.lock:
            try:
                if staging.fd < 0 and expected is not None:
                    # Fail fast before writing anything; the authoritative check is in _commit.
                    staging.dirfd, staging.name = _resolve_target(res, path, parents, owner, plain)
                    _check_expected(path, _existing(staging) is not None, expected)
                staging.append(res, blob, parents, owner)
                if not final:
                    return {"created": False, "size": staging.size, "sha256": staging.digest.hexdigest()}, b""
                return _commit(staging, mode, owner, expected, keep_old)
            except BaseException:
                # A failed write (conflict, disk full, ...) ends the upload and leaves no temporary file.
                if upload is not None and not final:
                    with _uploads_lock:
                        if _uploads.get(upload) is staging:
                            del _uploads[upload]
                staging.discard()
                raise


def _expire_uploads() -> None:
    """Drop uploads nobody finished (caller holds _uploads_lock)."""
    now = time.monotonic()
    for key, staging in list(_uploads.items()):
        if now - staging.touched > UPLOAD_IDLE and staging.lock.acquire(blocking=False):
            try:
                del _uploads[key]
                staging.discard()
            finally:
                staging.lock.release()


def discard_uploads() -> None:
    """Remove every staging file (daemon shutdown)."""
    with _uploads_lock:
        for staging in _uploads.values():
            staging.discard()
        _uploads.clear()


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {"write": op_write}
