"""File-system ops that change the tree: mkdir, remove, rename.

Every op takes the optional ``as_user`` and ``roots`` arguments (``fsaccess``): its
file access then runs with that user's credentials and stays beneath those roots.
Paths are opened once and the ops work on descriptors from there on.
"""

import contextlib
import errno
import os
import stat
from typing import Any, Callable, Dict, Optional, Tuple

from .errors import DaemonError, NotPlain, Reply
from .fsaccess import fs_access
from .fscommon import MISSING, abspath, open_or_none, owner_ids
from .fscreds import current
from .pathres import O_PATH, Outside, Resolver, entry_path
from .syscalls import RENAME_NOREPLACE, renameat2


def _set_owner_mode(dirfd: int, name: str, mode: int, ids: Optional[Tuple[int, int]]) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        if ids is not None and current() is None:
            os.fchown(fd, ids[0], ids[1])
        os.fchmod(fd, mode)  # modes ignore the umask
    finally:
        os.close(fd)


def make_dir(
    res: Resolver, path: str, mode: int, ids: Optional[Tuple[int, int]], parents: bool, plain: bool = False
) -> bool:
    """Create ``path`` (and with ``parents`` its missing parents, 0o755), owned by ``ids`` when
    the daemon acts as itself, else by the acting user. Returns whether ``path`` was created.
    ``plain``: refused (NotPlain, nothing made at that level) where a symbolic link leads
    to the directory it would be made in."""
    try:
        dirfd, name = _entry(res, path, plain)
    except FileNotFoundError:
        head = os.path.dirname(path.rstrip("/"))
        if not parents or head == path:
            raise
        make_dir(res, head, 0o755, ids, parents, plain)
        dirfd, name = _entry(res, path, plain)
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=dirfd)
        except FileExistsError:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=not plain)
            if stat.S_ISDIR(st.st_mode):
                return False  # there already, or created concurrently: fine
            if plain and stat.S_ISLNK(st.st_mode):
                raise NotPlain(path, "is a symbolic link") from None
            raise
        _set_owner_mode(dirfd, name, mode, ids)
        return True
    finally:
        os.close(dirfd)


def op_mkdir(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    parents = args["parents"]
    exist_ok = args["exist_ok"]
    mode = args["mode"]
    owner = owner_ids(args)
    # Plain: the path as given is the directory, no symbolic link on the way (see ops_write).
    plain = args["plain"]
    with fs_access(args) as res:
        if plain:
            created = make_dir(res, path, mode, owner, parents, plain=True)
            if not created and not exist_ok:
                raise DaemonError("exists", "already exists: %s" % path)
            return {"created": created}, b""
        fd = open_or_none(res, path, O_PATH | os.O_NOFOLLOW)
        if fd is not None:
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                if not is_dir and stat.S_ISLNK(os.fstat(fd).st_mode):
                    followed = open_or_none(res, path, O_PATH)
                    if followed is not None:
                        is_dir = stat.S_ISDIR(os.fstat(followed).st_mode)
                        os.close(followed)
            finally:
                os.close(fd)
            if is_dir and exist_ok:
                return {"created": False}, b""
            raise DaemonError("exists", "already exists: %s" % path)
        return {"created": make_dir(res, path, mode, owner, parents)}, b""


def _rmtree_at(dirfd: int, name: str) -> None:
    """Remove the directory ``name`` in ``dirfd`` and everything below it, never following links."""
    stack = [(dirfd, name, -1)]  # (parent fd, name, own fd once open)
    while stack:
        parent, entry_name, fd = stack[-1]
        if fd < 0:
            fd = os.open(entry_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            stack[-1] = (parent, entry_name, fd)
        subdir = None
        with os.scandir(fd) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    subdir = entry.name
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
        if subdir is not None:
            stack.append((fd, subdir, -1))
            continue
        os.close(fd)
        stack.pop()
        os.rmdir(entry_name, dir_fd=parent)


def _entry(res: Resolver, path: str, plain: bool) -> Tuple[int, str]:
    """The directory holding ``path``'s last component (open) and its name (a link's own)."""
    return plain_parent(path, plain, lambda: res.parent(path, follow=False))


def plain_parent(path: str, plain: bool, open_parent: Callable[[], Tuple[int, str]]) -> Tuple[int, str]:
    """``open_parent()``: the directory holding ``path``'s last component (open) and its name.
    ``plain``: refused (NotPlain) where a symbolic link led to that directory: the kernel's
    name of the directory opened is the path asked for only if no link was followed."""
    try:
        dirfd, name = open_parent()
    except Outside:
        if plain:  # only a link leads out of roots the path lies beneath
            raise NotPlain(path, "is reached through a symbolic link") from None
        raise
    if plain and entry_path(dirfd, name) != path.rstrip("/"):
        os.close(dirfd)
        raise NotPlain(path, "is reached through a symbolic link")
    return dirfd, name


def op_remove(args: Dict[str, Any], blob: bytes) -> Reply:
    path = abspath(args)
    recursive = args["recursive"]
    missing_ok = args["missing_ok"]
    with fs_access(args) as res:
        try:
            dirfd, name = _entry(res, path, args["plain"])
        except MISSING:
            dirfd, name = -1, ""
        try:
            st = None
            if dirfd >= 0:
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            if st is None:
                if missing_ok:
                    return {"removed": False}, b""
                raise DaemonError("not_found", "no such file or directory: %s" % path)
            if stat.S_ISDIR(st.st_mode):
                if recursive:
                    _rmtree_at(dirfd, name)
                else:
                    try:
                        os.rmdir(name, dir_fd=dirfd)
                    except OSError as exc:
                        if exc.errno == errno.ENOTEMPTY:
                            raise DaemonError("io_error", "directory not empty (pass recursive): %s" % path) from None
                        raise
            else:
                os.unlink(name, dir_fd=dirfd)  # a symlink is removed, never its target
        finally:
            if dirfd >= 0:
                os.close(dirfd)
    return {"removed": True}, b""


def op_rename(args: Dict[str, Any], blob: bytes) -> Reply:
    src = abspath(args, "src")
    dst = abspath(args, "dst")
    overwrite = args["overwrite"]
    plain = args["plain"]
    with fs_access(args) as res:
        src_dir, src_name = _entry(res, src, plain)
        try:
            dst_dir, dst_name = _entry(res, dst, plain)
        except BaseException:
            os.close(src_dir)
            raise
        try:
            if overwrite:
                os.rename(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
                return {}, b""
            err = renameat2(src_dir, src_name, dst_dir, dst_name, RENAME_NOREPLACE) if renameat2 else errno.ENOSYS
            if err in (errno.ENOSYS, errno.EINVAL):
                # No atomic no-replace here (old libc or a file system without it): check, then rename.
                try:
                    os.stat(dst_name, dir_fd=dst_dir, follow_symlinks=False)
                except FileNotFoundError:
                    os.rename(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
                    return {}, b""
                raise DaemonError("exists", "destination exists: %s" % dst)
            if err:
                raise OSError(err, os.strerror(err), dst if err == errno.EEXIST else src)
            return {}, b""
        finally:
            os.close(src_dir)
            os.close(dst_dir)


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {
    "mkdir": op_mkdir,
    "remove": op_remove,
    "rename": op_rename,
}
