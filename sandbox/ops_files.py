"""File-system ops that read: stat, read, list, walk.

Every op takes the optional ``as_user`` and ``roots`` arguments (``fsaccess``): its
file access then runs with that user's credentials and stays beneath those roots.
Paths are opened once and the ops work on descriptors from there on.
"""

import errno
import hashlib
import os
import stat
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import DaemonError, NotPlain, Reply
from .fsaccess import fs_access
from .fscommon import CHUNK, abspath, file_type, not_plain_because, open_or_none, sha256_fd
from .limits import MAX_BLOB, MAX_LISTING
from .pathres import O_PATH, Outside, Resolver, entry_path, fd_path

# An ignore file larger than this is not a real ignore file; do not ship it.
MAX_IGNORE_FILE = 1024 * 1024


# ---------------------------------------------------------------- stat / read


def op_stat(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    follow = args["follow"]
    # Extensions that save a caller's next round trip: the head of a regular file, and
    # where a missing path would be created.
    head = args["read"]
    nearest = args["nearest"]
    data = b""
    with fs_access(args) as res:
        fd = open_or_none(res, path, O_PATH | os.O_NOFOLLOW)
        if fd is None:
            return _missing(res, path, nearest), b""
        try:
            st = os.fstat(fd)
            target = None
            entry: Dict[str, Any] = {}
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink("", dir_fd=fd)  # the link this descriptor holds
                entry["entry"] = fd_path(fd)
                followed = open_or_none(res, path, O_PATH)
                if followed is None and follow:
                    # A dangling link: nothing to follow to.
                    return dict(_missing(res, path, nearest), **entry), b""
                if followed is not None:
                    os.close(fd)
                    fd = followed
                    if follow:
                        st = os.fstat(fd)
            realpath = fd_path(fd)
            result = dict(_meta(st, target), exists=True, realpath=realpath, **entry)
            if head and follow and stat.S_ISREG(st.st_mode):
                data = _head(fd, head, result)
            if args["writable"] and stat.S_ISREG(st.st_mode):
                result["writable"] = _writable(fd)
        finally:
            os.close(fd)
    return result, data


def _missing(res: Resolver, path: str, nearest: bool) -> Dict[str, Any]:
    """A missing path's reply; with ``nearest``, the real path it would have: where a write
    would create it, or with its parent missing too, its deepest existing ancestor's realpath
    joined with the rest."""
    result: Dict[str, Any] = {"exists": False}
    if nearest:
        # Where a write would create it: a dangling link at the end is followed, as writes do.
        try:
            dirfd, name = res.parent(path, follow=True)
        except (DaemonError, OSError):
            pass  # a parent missing too (or not this user's): the nearest ancestor tells
        else:
            try:
                result["nearest"] = entry_path(dirfd, name)
            finally:
                os.close(dirfd)
            return result
    probe, rest = path, ""
    while nearest and probe != "/":
        probe, name = os.path.split(probe)
        rest = os.path.join(name, rest) if rest else name
        try:
            fd = open_or_none(res, probe, O_PATH)
        except (DaemonError, OSError):
            continue  # not for this user, or outside the roots: as missing
        if fd is not None:
            try:
                result["nearest"] = os.path.join(fd_path(fd), rest)
            finally:
                os.close(fd)
            break
    return result


def _writable(fd: int) -> bool:
    """Whether the request's user may open the regular file ``fd`` (an O_PATH descriptor) for
    writing: opened so (no truncation, nothing written) and closed; the kernel decides, with
    the user's groups, the file's mode and ACLs, and a read-only mount or immutable file."""
    try:
        os.close(os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError:
        return False
    return True


def _head(fd: int, size: int, result: Dict[str, Any]) -> bytes:
    """Up to ``size`` bytes of the file ``fd`` (an O_PATH descriptor) holds, opened for reading
    as the request's user; notes ``read_eof`` (and ``sha256`` of a whole file) in ``result``.
    A file that user cannot read gives nothing and no note."""
    try:
        rfd = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    chunks: List[bytes] = []
    got = 0
    try:
        while got <= size:  # one byte more than asked tells whether that is all
            chunk = os.pread(rfd, size + 1 - got, got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError:
        return b""
    finally:
        os.close(rfd)
    data = b"".join(chunks)
    eof = len(data) <= size
    data = data[:size]
    result["read_eof"] = eof
    if eof:
        result["sha256"] = hashlib.sha256(data).hexdigest()
    return data


def _meta(st: os.stat_result, target: Optional[str]) -> Dict[str, Any]:
    """What stat and list both report about a file."""
    return {
        "type": file_type(st.st_mode),
        "size": st.st_size,
        "mode": st.st_mode,
        "mtime": st.st_mtime,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "nlink": st.st_nlink,
        "target": target,
    }


def op_read(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    offset = args["offset"]
    length = args["length"]
    max_bytes = args["max_bytes"]
    want_hash = args["hash"]
    limit = MAX_BLOB if max_bytes is None else min(max_bytes, MAX_BLOB)
    # The caller's cap on the whole file (not this range): a larger file is refused unread.
    max_size = args["max_size"]
    plain = args["plain"]
    with fs_access(args) as res:
        # O_NONBLOCK so that opening a FIFO cannot hang the worker.
        fd = _open_plain(res, path) if plain else res.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if max_size is not None:
                size = os.fstat(fd).st_size
                if size > max_size:
                    raise DaemonError(
                        "output_limit", "%s is %d bytes, over the limit of %d: %s" % (path, size, max_size, path)
                    )
            return _read_fd(fd, path, offset, length, limit, want_hash)
        finally:
            os.close(fd)


def _open_plain(res: Resolver, path: str) -> int:
    """``path`` opened for reading only if it is the real one: no symbolic link on the way
    (the kernel's name of the file opened is the path asked for), a regular file, its only
    name. Checked on the descriptor, so a swap after the check reads nothing else."""
    try:
        fd = res.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except Outside:  # only a link leads out of roots the path lies beneath
        raise NotPlain(path, "is reached through a symbolic link") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotPlain(path, "is a symbolic link") from None
        raise
    why = "is reached through a symbolic link" if fd_path(fd) != path.rstrip("/") else not_plain_because(os.fstat(fd))
    if why:
        os.close(fd)
        raise NotPlain(path, why)
    return fd


def _read_fd(fd: int, path: str, offset: int, length: int, limit: int, want_hash: bool) -> Reply:
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
        want = CHUNK if length < 0 else min(CHUNK, length - got)
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
        result["sha256"] = hashlib.sha256(data).hexdigest() if offset == 0 and eof else sha256_fd(fd)
    return result, data


# ---------------------------------------------------------------- list / walk


def op_list(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    entries = []
    budget = MAX_LISTING
    with fs_access(args) as res:
        fd = res.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    budget -= 160 + 3 * len(entry.name)  # generous JSON size of one entry
                    if budget < 0:
                        raise DaemonError("too_large", "directory has too many entries to list: %s" % path)
                    try:
                        st = entry.stat(follow_symlinks=False)
                        target = os.readlink(entry.name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
                    except FileNotFoundError:
                        continue  # removed while we listed
                    entries.append(dict(_meta(st, target), name=entry.name))
        finally:
            os.close(fd)
    return {"entries": entries}, b""


def _read_ignore_file(dirfd: int, name: str) -> Optional[str]:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        return None
    try:
        data = os.read(fd, MAX_IGNORE_FILE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_IGNORE_FILE:
        return None
    return data.decode("utf-8", "replace")


_TYPES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def op_walk(args: Dict[str, Any], blob: bytes) -> Reply:
    root = abspath(args)
    include_hidden = args["include_hidden"]
    max_entries = args["max_entries"]
    ignore_files = args["ignore_files"]
    # Extension: each entry's permission bits, and a symbolic link's target (for copy_out).
    detail = args["detail"]
    if not all(isinstance(name, str) and name and "/" not in name for name in ignore_files):
        raise DaemonError("bad_request", "ignore_files must be a list of file names")
    wanted = frozenset(ignore_files)
    entries: List[Dict[str, Any]] = []
    ignore: Dict[str, str] = {}
    state = {"budget": MAX_LISTING, "truncated": False}

    def scan(fd: int, rel: str) -> List[str]:
        """Record the entries of one directory; returns its subdirectories' names, in order."""
        prefix = rel + "/" if rel else ""
        try:
            with os.scandir(fd) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            return []  # unreadable or vanished directory: skip it, keep walking
        found: Dict[str, str] = {}
        subdirs = []
        for entry in items:
            name = entry.name
            if name in wanted and entry.is_file(follow_symlinks=False):
                content = _read_ignore_file(fd, name)
                if content is not None:
                    found[name] = content
            if not include_hidden and name[0] == ".":
                continue
            path = prefix + name
            # Estimated JSON size of the entry (3 bytes per char covers UTF-8 and most escapes).
            state["budget"] -= 72 + (len(path) if path.isascii() else 3 * len(path))
            if len(entries) >= max_entries or state["budget"] < 0:
                state["truncated"] = True
                break
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = _TYPES.get(stat.S_IFMT(st.st_mode), "other")
            item = {"path": path, "type": kind, "size": st.st_size, "mtime": st.st_mtime}
            if detail:
                item["mode"] = stat.S_IMODE(st.st_mode)
                if kind == "symlink":
                    try:
                        item["target"] = os.readlink(name, dir_fd=fd)
                    except OSError:
                        continue
            entries.append(item)
            if kind == "dir":
                subdirs.append(name)
        if found:
            content = ignore[rel] = "\n".join(found[name] for name in ignore_files if name in found)
            state["budget"] -= 16 + 2 * len(content) + 3 * len(rel)
        return subdirs

    with fs_access(args) as res:
        try:
            top = res.open(root, os.O_RDONLY | os.O_DIRECTORY)
        except NotADirectoryError:
            raise DaemonError("not_a_directory", "not a directory: %s" % root) from None
        # Depth first, each directory's entries before its subdirectories (in name order);
        # only the directories on the current path are open, each opened without following links.
        stack: List[Tuple[int, str, List[str]]] = []
        try:
            stack.append((top, "", scan(top, "")))
            while stack and not state["truncated"]:
                fd, rel, subdirs = stack[-1]
                if not subdirs:
                    os.close(fd)
                    stack.pop()
                    continue
                name = subdirs.pop(0)
                try:
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    continue
                child_rel = rel + "/" + name if rel else name
                stack.append((child, child_rel, []))
                stack[-1] = (child, child_rel, scan(child, child_rel))
        finally:
            for fd, _, _ in stack:
                os.close(fd)
    return {"entries": entries, "ignore": ignore, "truncated": state["truncated"]}, b""


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {
    "stat": op_stat,
    "read": op_read,
    "list": op_list,
    "walk": op_walk,
}
