"""Unpacking a tar that a sandbox produced onto the host, with the host's own containment.

The archive is hostile input: its names, link targets, types and sizes are the agent's (or a
compromised daemon's). Nothing here relies on ``tarfile``'s extraction or its filters (their
link-chain bypasses differ by Python version); ``tarfile`` only parses headers. The rules:

- The whole archive is checked before anything is written (a hostile one writes nothing):
  member names are relative, without ``..``, empty or NUL components; no member lies beneath
  a member that is a symbolic link; member count and total size are bounded.
- Directories and regular files are made one component at a time from a descriptor of the
  destination, every component opened with ``O_NOFOLLOW``: no symbolic link is followed on
  the way, whoever made it (the archive, or the host before the copy).
- Symbolic links are recreated only when their target is relative and stays beneath the
  destination read from where the link sits; others are left out and reported (a member
  beneath or in place of one refuses the whole archive). Hard links, devices,
  FIFOs and sockets are refused.
- Modes keep only the permission bits (no setuid, setgid or sticky); owners are the host
  user's; modification times are kept.
"""

from __future__ import annotations

import errno
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from caisson.errors import OpError

# What a copy may unpack by default: well above a workspace, well below a host's disk.
DEFAULT_MAX_MEMBERS = 200_000
DEFAULT_MAX_BYTES = 16 * 1024**3
# The longest link target (Linux's PATH_MAX) and name component (NAME_MAX). A member's whole
# name may be longer than PATH_MAX: it is made one component at a time.
MAX_TARGET = 4096
MAX_COMPONENT = 255
MAX_NAME = 64 * 1024
_PIECE = 1024 * 1024


@dataclass(frozen=True)
class ExtractLimits:
    max_members: int = DEFAULT_MAX_MEMBERS
    max_bytes: int = DEFAULT_MAX_BYTES


def _hostile(why: str) -> OpError:
    return OpError("hostile_archive", f"refused the archive, nothing was written: {why}")


def member_parts(name: str) -> tuple[str, ...]:
    """A member name's components, or an error when the name could lead anywhere but beneath
    the destination. ``./`` and trailing slashes are tar's usual forms and accepted."""
    if not name or len(name) > MAX_NAME or "\x00" in name:
        raise _hostile(f"member name {name[:200]!r} is empty, too long or holds a NUL")
    if name.startswith("/"):
        raise _hostile(f"member {name[:200]!r} has an absolute name")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _hostile(f"member {name[:200]!r} has a '..' component")
    if any(len(p.encode("utf-8", "surrogateescape")) > MAX_COMPONENT for p in parts):
        raise _hostile(f"member {name[:200]!r} has a component longer than {MAX_COMPONENT} bytes")
    return parts


def link_stays_inside(parts: tuple[str, ...], target: str) -> bool:
    """Whether a symbolic link at ``parts`` pointing to ``target`` resolves (lexically, which
    is all the extraction lets it do: nothing beneath it is written) beneath the destination."""
    if not target or target.startswith("/") or "\x00" in target or len(target) > MAX_TARGET:
        return False
    depth = len(parts) - 1  # the directory the link sits in
    for piece in target.split("/"):
        if piece in ("", "."):
            continue
        depth = depth - 1 if piece == ".." else depth + 1
        if depth < 0:
            return False
    return True


Members = list[tuple[tarfile.TarInfo, tuple[str, ...]]]


def _check(tar: tarfile.TarFile, limits: ExtractLimits) -> tuple[Members, list[str]]:
    """The members to unpack, and the names of symbolic links left out (leading out)."""
    members: Members = []
    left_out: list[str] = []
    links: set[tuple[str, ...]] = set()
    total = 0
    for info in tar:
        if len(members) >= limits.max_members:
            raise _hostile(f"more than {limits.max_members} members")
        parts = member_parts(info.name)
        if any(parts[:i] in links for i in range(1, len(parts) + 1)):
            raise _hostile(f"member {info.name[:200]!r} lies beneath or replaces a symbolic link of the archive")
        if info.issym():
            if not parts:
                raise _hostile("a symbolic link named as the destination itself")
            links.add(parts)
            if not link_stays_inside(parts, info.linkname):
                left_out.append("/".join(parts))  # a workspace's venv has such links: not hostile
                continue
        elif info.islnk():
            raise _hostile(f"hard link {info.name[:200]!r}: hard links are not unpacked")
        elif not (info.isdir() or info.isreg()):
            raise _hostile(f"member {info.name[:200]!r} is a device, FIFO or other special file")
        elif info.isreg() and not parts:
            raise _hostile("a regular file named as the destination itself")
        total += max(info.size, 0)
        if total > limits.max_bytes:
            raise _hostile(f"more than {limits.max_bytes} bytes of content")
        members.append((info, parts))
    return members, left_out


def _open_dir(parent: int, name: str) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)


def _parent(root: int, parts: tuple[str, ...]) -> int:
    """A descriptor of the directory that holds ``parts[-1]``, made as needed, no link followed."""
    fd = os.dup(root)
    try:
        for part in parts[:-1]:
            try:
                child = _open_dir(fd, part)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                child = _open_dir(fd, part)
            os.close(fd)
            fd = child
        return fd
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OpError("hostile_archive", f"{'/'.join(parts)}: a symbolic link or file is in the way on the host") from None
        raise


def _replace_leaf(parent: int, name: str) -> None:
    """Remove what is at ``name`` unless it is a directory (a file the copy overwrites)."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent)


def _write_file(parent: int, name: str, info: tarfile.TarInfo, data: IO[bytes] | None) -> None:
    _replace_leaf(parent, name)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
    try:
        left = info.size
        while data is not None and left > 0:
            piece = data.read(min(_PIECE, left))
            if not piece:
                raise OpError("hostile_archive", f"{info.name[:200]!r}: the archive ends inside this member")
            os.write(fd, piece)
            left -= len(piece)
        os.fchmod(fd, info.mode & 0o777)
        os.utime(fd, (info.mtime, info.mtime))
    finally:
        os.close(fd)


def _unpack(tar: tarfile.TarFile, root: int, members: Members) -> None:
    dir_modes: list[tuple[tuple[str, ...], int, float]] = []
    for info, parts in members:
        if not parts:  # the destination itself
            continue
        parent = _parent(root, parts)
        try:
            name = parts[-1]
            if info.isdir():
                try:
                    os.mkdir(name, 0o700, dir_fd=parent)
                except FileExistsError:
                    os.close(_open_dir(parent, name))  # refuses a link or file in its place
                dir_modes.append((parts, info.mode & 0o777, info.mtime))
            elif info.issym():
                _replace_leaf(parent, name)
                os.symlink(info.linkname, name, dir_fd=parent)
            else:
                _write_file(parent, name, info, tar.extractfile(info))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):
                raise OpError("hostile_archive", f"{info.name[:200]!r}: a symbolic link or file is in the way on the host") from None
            raise
        finally:
            os.close(parent)
    # Directory modes last, deepest first: a read-only directory must not stop its own filling.
    for parts, mode, mtime in reversed(dir_modes):
        parent = _parent(root, parts)
        try:
            fd = _open_dir(parent, parts[-1])
            try:
                os.fchmod(fd, mode | 0o700)
                os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)
        finally:
            os.close(parent)


def extract(fileobj: IO[bytes], dest: str | os.PathLike[str], limits: ExtractLimits | None = None) -> list[str]:
    """Unpack the seekable tar ``fileobj`` into the host directory ``dest`` (made if missing);
    returns the symbolic links left out because they lead out of it. A hostile archive raises
    ``OpError('hostile_archive')`` having written nothing."""
    limits = limits or ExtractLimits()
    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    root = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            with tarfile.open(fileobj=fileobj, mode="r:") as tar:
                members, left_out = _check(tar, limits)
                _unpack(tar, root, members)
        except tarfile.TarError as exc:
            raise _hostile(f"not a valid tar archive ({exc})") from None
    finally:
        os.close(root)
    return left_out

