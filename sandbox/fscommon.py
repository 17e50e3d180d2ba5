"""Helpers shared by the file-system ops: path arguments, file types, hashing, owners."""

import hashlib
import os
import stat
from typing import Any, Dict, Optional, Tuple

from .errors import DaemonError
from .pathres import Resolver
from .users import resolve_user

CHUNK = 1024 * 1024


def abspath(args: Dict[str, Any], name: str = "path") -> str:
    path = args[name]  # a string: the op's declaration says so (opspec)
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


def not_plain_because(st: os.stat_result) -> str:
    """Why a file reached without a symbolic link is still not plain (a regular file's only
    name), or "" when it is."""
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink > 1:
        return "has %d names (hard links)" % st.st_nlink
    return ""


def sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    pos = 0
    while True:
        chunk = os.pread(fd, CHUNK, pos)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)
        pos += len(chunk)


def owner_ids(args: Dict[str, Any]) -> Optional[Tuple[int, int]]:
    owner = args.get("owner")
    if owner is None:
        return None
    info = resolve_user(owner)
    return info.uid, info.gid


# A path that is not there (or has a file where a directory should be).
MISSING = (FileNotFoundError, NotADirectoryError)


def open_or_none(res: Resolver, path: str, flags: int) -> Optional[int]:
    try:
        return res.open(path, flags)
    except MISSING:
        return None
