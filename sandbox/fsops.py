"""File-system ops: ping, stat, read, write, list, walk, mkdir, remove, rename.

Paths must be absolute container paths. Writes are atomic (temporary file in
the target's directory, fsync, rename) and can be compare-and-swap guarded by
the SHA-256 of the current content.
"""

import contextlib
import errno
import hashlib
import os
import platform
import shutil
import stat
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import __version__
from .errors import DaemonError, Reply, get, get_nonneg
from .limits import MAX_BLOB, MAX_LISTING
from .protocol import PROTOCOL_VERSION
from .syscalls import rename_noreplace
from .users import resolve_user

# An ignore file larger than this is not a real ignore file; do not ship it.
MAX_IGNORE_FILE = 1024 * 1024
# Staging files of uploads that saw no chunk for this long are deleted.
UPLOAD_IDLE = 600.0
_CHUNK = 1024 * 1024
_HEX = frozenset("0123456789abcdef")



def _owner_ids(args: Dict[str, Any]) -> Optional[Tuple[int, int]]:
    owner = args.get("owner")
    if owner is None:
        return None
    info = resolve_user(owner)
    return info.uid, info.gid


# ---------------------------------------------------------------- helpers


def abspath(args: Dict[str, Any], name: str = "path") -> str:
    path = get(args, name, str)
    if not path.startswith("/"):
        raise DaemonError("bad_request", "%s must be an absolute path, got %r" % (name, path))
    if "\0" in path:
        raise DaemonError("bad_request", "%s contains a NUL byte" % name)
    return path  # type: ignore[no-any-return]


def file_type(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _lstat(path: str) -> Optional[os.stat_result]:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    pos = 0
    while True:
        chunk = os.pread(fd, _CHUNK, pos)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)
        pos += len(chunk)


def _sha256_path(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        return _sha256_fd(fd)
    finally:
        os.close(fd)


def _makedirs(path: str, mode: int, ids: Optional[Tuple[int, int]]) -> bool:
    """Create ``path`` and missing parents (parents 0o755, leaf ``mode``), owned by ``ids``.

    Unlike os.makedirs, every directory created is chowned, and modes ignore the umask.
    Returns whether ``path`` itself was created.
    """
    missing: List[str] = []
    probe = path
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    created = False
    for index, directory in enumerate(reversed(missing)):
        leaf = index == len(missing) - 1
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if os.path.isdir(directory):  # created concurrently: fine
                continue
            raise
        if ids is not None:
            os.chown(directory, ids[0], ids[1])
        os.chmod(directory, mode if leaf else 0o755)
        created = created or leaf
    return created


# ---------------------------------------------------------------- ping / stat / read


def op_ping(args: Dict[str, Any], blob: bytes) -> Reply:
    return (
        {
            "version": __version__,
            "protocol": PROTOCOL_VERSION,
            "python": platform.python_version(),
            "rg": shutil.which("rg"),
            "pid": os.getpid(),
            "uid": os.getuid(),
        },
        b"",
    )


def op_stat(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    follow = get(args, "follow", bool, True)
    st = _lstat(path)
    if st is None:
        return {"exists": False}, b""
    target = None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        if follow:
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                return {"exists": False}, b""  # dangling link: nothing to follow to
    return (
        {
            "exists": True,
            "type": file_type(st.st_mode),
            "size": st.st_size,
            "mode": st.st_mode,
            "mtime": st.st_mtime,
            "uid": st.st_uid,
            "gid": st.st_gid,
            "target": target,
            "realpath": os.path.realpath(path),
        },
        b"",
    )


def op_read(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    offset = get_nonneg(args, "offset", 0)
    length = get(args, "length", int, -1)
    if length < -1:
        raise DaemonError("bad_request", "length must be -1 (all) or >= 0")
    max_bytes = get_nonneg(args, "max_bytes", None)
    want_hash = get(args, "hash", bool, False)
    limit = MAX_BLOB if max_bytes is None else min(max_bytes, MAX_BLOB)
    # O_NONBLOCK so that opening a FIFO cannot hang the worker.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DaemonError("is_a_directory", "is a directory: %s" % path)
        if not stat.S_ISREG(st.st_mode):
            raise DaemonError("bad_request", "not a regular file: %s" % path)
        size = st.st_size
        selected = max(0, size - offset) if length < 0 else min(length, max(0, size - offset))
        if selected > limit:
            raise DaemonError("too_large", "range of %d bytes exceeds the limit of %d" % (selected, limit))
        # Read until EOF (or ``length``) rather than trusting st_size: /proc files say 0.
        chunks: List[bytes] = []
        pos = offset
        got = 0
        eof = False
        while length < 0 or got < length:
            want = _CHUNK if length < 0 else min(_CHUNK, length - got)
            chunk = os.pread(fd, max(want, selected - got), pos)
            if not chunk:
                eof = True
                break
            chunks.append(chunk)
            got += len(chunk)
            pos += len(chunk)
            if got > limit:
                raise DaemonError("too_large", "range exceeds the limit of %d bytes" % limit)
        data = b"".join(chunks)
        if pos >= size > 0:
            eof = True
        if eof:
            size = max(size, pos)
        result: Dict[str, Any] = {"size": size, "offset": offset, "eof": eof}
        if want_hash:
            result["sha256"] = hashlib.sha256(data).hexdigest() if offset == 0 and eof else _sha256_fd(fd)
        return result, data
    finally:
        os.close(fd)


# ---------------------------------------------------------------- write


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


class _Staging:
    """A temporary file next to the target that receives the new content."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.fd = -1
        self.tmp = ""
        self.digest = hashlib.sha256()
        self.size = 0
        self.lock = threading.Lock()  # orders chunks of one upload
        self.touched = time.monotonic()
        self.done = False  # committed or discarded: a late chunk must not start a new file

    def append(self, data: bytes, parents: bool, dir_owner: Optional[Tuple[int, int]]) -> None:
        if self.done:
            raise DaemonError("bad_request", "upload already finished or failed: %s" % self.target)
        if self.fd < 0:
            parent = os.path.dirname(self.target)
            if not os.path.isdir(parent):
                if not parents:
                    raise DaemonError("not_found", "parent directory does not exist: %s" % parent)
                _makedirs(parent, 0o755, dir_owner)
            name = os.path.basename(self.target)[:96]
            self.fd, self.tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".caisson-tmp", dir=parent)
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
                os.unlink(self.tmp)
            self.tmp = ""


_uploads: Dict[str, _Staging] = {}
_uploads_lock = threading.Lock()


def _check_expected(target: str, existing: Optional[os.stat_result], expected: Optional[str], deep: bool) -> None:
    if expected is None:
        return
    if expected == "":
        if existing is not None:
            raise DaemonError("conflict", "file exists but was expected not to: %s" % target)
        return
    if existing is None:
        raise DaemonError("conflict", "file does not exist but was expected to: %s" % target)
    if deep and _sha256_path(target) != expected:
        raise DaemonError("conflict", "file changed (sha256 differs): %s" % target)


def _commit(
    staging: _Staging, mode: int, owner: Optional[Tuple[int, int]], expected: Optional[str]
) -> Dict[str, Any]:
    """Compare-and-swap the staged content into place; the caller discards ``staging`` on failure."""
    target = staging.target
    with _path_locks.hold(target):
        existing = _lstat(target)
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise DaemonError("is_a_directory", "is a directory: %s" % target)
        _check_expected(target, existing, expected, deep=True)
        if existing is not None:
            # Replace the file, not its identity: same mode and owner as before.
            mode = stat.S_IMODE(existing.st_mode)
            owner = (existing.st_uid, existing.st_gid)
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            try:
                os.fchown(staging.fd, owner[0], owner[1])
            except PermissionError:
                if os.geteuid() == 0:
                    raise
                # Unprivileged daemon: cannot give files away; keep ours.
        os.fchmod(staging.fd, mode)  # after fchown, which clears set-id bits
        os.fsync(staging.fd)
        os.close(staging.fd)
        staging.fd = -1
        os.replace(staging.tmp, target)
        staging.tmp = ""
        staging.done = True
    return {"created": existing is None, "size": staging.size, "sha256": staging.digest.hexdigest()}


def op_write(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    mode = get_nonneg(args, "mode", 0o644, limit=0o7777)
    parents = get(args, "parents", bool, True)
    expected = get(args, "expected_sha256", str, None)
    if expected is not None and expected != "" and (len(expected) != 64 or not _HEX.issuperset(expected)):
        raise DaemonError("bad_request", "expected_sha256 must be null, \"\" or 64 lowercase hex digits")
    upload = get(args, "upload", str, None)
    final = get(args, "final", bool, upload is None)
    owner = _owner_ids(args)
    # Write through a symlink to its target (as editors do) rather than replacing the link;
    # the canonical path is also what serialises concurrent writers of one file.
    target = os.path.realpath(path)

    if upload is None:
        # Fail fast before creating anything; the authoritative check is in _commit.
        _check_expected(target, _lstat(target), expected, deep=False)
        staging = _Staging(target)
    else:
        with _uploads_lock:
            _expire_uploads()
            staging = _uploads.get(upload)  # type: ignore[assignment]
            if staging is None:
                staging = _uploads[upload] = _Staging(target)
            elif staging.target != target:
                raise DaemonError("bad_request", "upload %r is for %s, not %s" % (upload, staging.target, target))
            if final:
                del _uploads[upload]
    with staging.lock:
        try:
            staging.append(blob, parents, owner)
            if not final:
                return {"created": False, "size": staging.size, "sha256": staging.digest.hexdigest()}, b""
            return _commit(staging, mode, owner, expected), b""
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


# ---------------------------------------------------------------- list / walk


def op_list(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    entries = []
    budget = MAX_LISTING
    with os.scandir(path) as it:
        for entry in it:
            budget -= 160 + 3 * len(entry.name)  # generous JSON size of one entry
            if budget < 0:
                raise DaemonError("too_large", "directory has too many entries to list: %s" % path)
            try:
                st = entry.stat(follow_symlinks=False)
                target = os.readlink(entry.path) if stat.S_ISLNK(st.st_mode) else None
            except FileNotFoundError:
                continue  # removed while we listed
            entries.append(
                {
                    "name": entry.name,
                    "type": file_type(st.st_mode),
                    "size": st.st_size,
                    "mode": st.st_mode,
                    "mtime": st.st_mtime,
                    "uid": st.st_uid,
                    "gid": st.st_gid,
                    "target": target,
                }
            )
    return {"entries": entries}, b""


def _read_ignore_file(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_IGNORE_FILE + 1)
    except OSError:
        return None
    if len(data) > MAX_IGNORE_FILE:
        return None
    return data.decode("utf-8", "replace")


def op_walk(args: Dict[str, Any], blob: bytes) -> Reply:
    root = abspath(args)
    include_hidden = get(args, "include_hidden", bool, False)
    max_entries = get_nonneg(args, "max_entries", 200000)
    ignore_files = get(args, "ignore_files", list, [".gitignore"])
    if not all(isinstance(name, str) and name and "/" not in name for name in ignore_files):
        raise DaemonError("bad_request", "ignore_files must be a list of file names")
    wanted = frozenset(ignore_files)
    if not os.path.isdir(root):
        os.stat(root)  # raises not_found etc. when missing
        raise DaemonError("not_a_directory", "not a directory: %s" % root)

    base = root.rstrip("/") + "/"
    entries: List[Dict[str, Any]] = []
    ignore: Dict[str, str] = {}
    truncated = False
    budget = MAX_LISTING
    stack = [""]  # relative directories still to scan
    types = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}
    while stack and not truncated:
        rel = stack.pop()
        prefix = rel + "/" if rel else ""
        try:
            with os.scandir(base + rel) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable or vanished directory: skip it, keep walking
        found: Dict[str, str] = {}
        subdirs = []
        for entry in items:
            name = entry.name
            if name in wanted and entry.is_file(follow_symlinks=False):
                content = _read_ignore_file(entry.path)
                if content is not None:
                    found[name] = content
            if not include_hidden and name[0] == ".":
                continue
            path = prefix + name
            # Estimated JSON size of the entry (3 bytes per char covers UTF-8 and most escapes).
            budget -= 72 + (len(path) if path.isascii() else 3 * len(path))
            if len(entries) >= max_entries or budget < 0:
                truncated = True
                break
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = types.get(stat.S_IFMT(st.st_mode), "other")
            entries.append({"path": path, "type": kind, "size": st.st_size, "mtime": st.st_mtime})
            if kind == "dir":
                subdirs.append(path)
        if found:
            content = ignore[rel] = "\n".join(found[name] for name in ignore_files if name in found)
            budget -= 16 + 2 * len(content) + 3 * len(rel)
        stack.extend(reversed(subdirs))  # pop() then visits them in name order
    return {"entries": entries, "ignore": ignore, "truncated": truncated}, b""


# ---------------------------------------------------------------- mkdir / remove / rename


def op_mkdir(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    parents = get(args, "parents", bool, True)
    exist_ok = get(args, "exist_ok", bool, True)
    mode = get_nonneg(args, "mode", 0o755, limit=0o7777)
    owner = _owner_ids(args)
    if os.path.lexists(path):
        if os.path.isdir(path) and exist_ok:
            return {"created": False}, b""
        raise DaemonError("exists", "already exists: %s" % path)
    if parents:
        created = _makedirs(path, mode, owner)
    else:
        os.mkdir(path, 0o700)
        if owner is not None:
            os.chown(path, owner[0], owner[1])
        os.chmod(path, mode)
        created = True
    return {"created": created}, b""


def op_remove(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    recursive = get(args, "recursive", bool, False)
    missing_ok = get(args, "missing_ok", bool, False)
    st = _lstat(path)
    if st is None:
        if missing_ok:
            return {"removed": False}, b""
        raise DaemonError("not_found", "no such file or directory: %s" % path)
    if stat.S_ISDIR(st.st_mode):
        if recursive:
            shutil.rmtree(path)
        else:
            try:
                os.rmdir(path)
            except OSError as exc:
                if exc.errno == errno.ENOTEMPTY:
                    raise DaemonError("io_error", "directory not empty (pass recursive): %s" % path) from None
                raise
    else:
        os.unlink(path)  # a symlink is removed, never its target
    return {"removed": True}, b""


def op_rename(args: Dict[str, Any], blob: bytes) -> Reply:
    src = abspath(args, "src")
    dst = abspath(args, "dst")
    overwrite = get(args, "overwrite", bool, True)
    if overwrite:
        os.rename(src, dst)
        return {}, b""
    err = rename_noreplace(-100, src, -100, dst) if rename_noreplace is not None else errno.ENOSYS
    if err in (errno.ENOSYS, errno.EINVAL):
        # No atomic no-replace here (old libc or a file system without it): check, then rename.
        if os.path.lexists(dst):
            raise DaemonError("exists", "destination exists: %s" % dst)
        os.rename(src, dst)
    elif err:
        raise OSError(err, os.strerror(err), dst if err == errno.EEXIST else src)
    return {}, b""


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {
    "ping": op_ping,
    "stat": op_stat,
    "read": op_read,
    "write": op_write,
    "list": op_list,
    "walk": op_walk,
    "mkdir": op_mkdir,
    "remove": op_remove,
    "rename": op_rename,
}
