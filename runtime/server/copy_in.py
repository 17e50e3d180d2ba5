"""A tenant's copy-in: a tar stream extracted into a session as the agent's files, all or
nothing. The archive is read whole and every member's landing decided before the first write:
its name by the session's policy (``writes.check``, as a file write), and what the session holds
there now (a symbolic link on the way, a directory where a file goes, a file with other names,
a file the agent may not open for writing refuse the archive at once). Then directories are
made, new files written, existing files replaced and symbolic links made, each change plain.
What stops it after that (a link the agent swapped in meanwhile, a file made unwritable
meanwhile, a full disk) removes again what it had made anew, and puts back the old content
of the files it had replaced (each replacement's write returns what it replaced).

A hard-link member is taken as another name of a regular file earlier in the same archive (as
tar writes a file's second name) and lands as a copy of it: a link in the session to a file
already there could be a secret's other name."""

from __future__ import annotations

import posixpath
import tarfile
import tempfile
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import IO, Literal

import anyio

from caisson.client import extract
from caisson.client.models import Confinement, StatResult
from caisson.errors import CaissonError, OpError
from caisson.policy.paths import normalize
from caisson.server.tenancy import Live
from caisson.server.writes import INSTEAD, check, landing, plain

# A copy-in's archive is kept here until every member is checked: in memory up to this, on disk beyond.
SPOOL_IN_MEMORY = 8 * 1024 * 1024
# Looks at the session's paths in flight at once while deciding (one round trip each).
LOOKS_AT_ONCE = 16
# Paths named in an error, at most.
NAMED = 20
# An existing file's old content is kept (in memory) to be put back if the copy-in stops, up
# to this size; a larger one replaced before the stop is named as lost.
KEEP_OLD = 16 * 1024 * 1024

Kind = Literal["dir", "file", "symlink"]


@dataclass(frozen=True)
class _Member:
    name: str  # as the archive names it
    parts: tuple[str, ...]  # beneath the destination
    path: str  # where it lands: the destination's real path joined with ``parts``
    kind: Kind
    mode: int = 0o644
    target: str = ""  # a symbolic link's
    content: tarfile.TarInfo | None = None  # a file's member holding its data (a hard link's: the file it names)


def _refused(why: str) -> OpError:
    return OpError("hostile_archive", f"refused the archive, nothing was written: {why}")


def _hard_link(
    info: tarfile.TarInfo, parts: tuple[str, ...], dest: str, found: dict[str, _Member], files: dict[str, _Member]
) -> _Member:
    """A hard-link member as a copy of the regular file, earlier in the archive, that it names."""
    try:
        named = posixpath.join(dest, *extract.member_parts(info.linkname))
    except OpError:
        named = ""
    earlier = files.get(named)
    if earlier is not None:
        return _Member(info.name, parts, posixpath.join(dest, *parts), "file", earlier.mode, content=earlier.content)
    other = found.get(named)
    if not named:
        why = "which leads out of the archive"
    elif other is None:
        why = "which names no regular file before it in the archive (a file in the session, or a later member)"
    elif other.kind == "file":
        why = "another hard link of the archive"
    else:
        why = "a directory of the archive" if other.kind == "dir" else "a symbolic link of the archive"
    raise _refused(
        f"member {info.name[:200]!r} is a hard link to {info.linkname[:200]!r}, {why}; a tenant's copy-in takes a hard "
        "link only as another name of a regular file earlier in the same archive (as tar writes one), and makes it a "
        "copy: put the file itself in the archive under this name instead (GNU tar: --hard-dereference)"
    )


def _members(spool: IO[bytes], dest: str) -> list[_Member]:
    """Every member of the archive, placed beneath ``dest``, a name given twice once (the later
    member's). An archive holding anything but directories, regular files, symbolic links and
    hard links to its own files, a name that leads out, or a member beneath one of its links or
    files, is refused whole."""
    found: dict[str, _Member] = {}
    files: dict[str, _Member] = {}  # regular-file members by where they land: what a hard link may name
    try:
        with tarfile.open(fileobj=spool, mode="r:*") as tar:
            for info in tar:
                if len(found) >= extract.DEFAULT_MAX_MEMBERS:
                    raise _refused(f"more than {extract.DEFAULT_MAX_MEMBERS} members")
                parts = extract.member_parts(info.name)
                if not parts:
                    continue  # the destination itself ("./")
                path = posixpath.join(dest, *parts)
                if info.isdir():
                    member = _Member(info.name, parts, path, "dir")
                elif info.isreg():
                    member = _Member(info.name, parts, path, "file", info.mode & 0o777, content=info)
                elif info.issym():
                    member = _Member(info.name, parts, path, "symlink", target=info.linkname)
                elif info.islnk():
                    member = _hard_link(info, parts, dest, found, files)
                else:
                    raise _refused(f"member {info.name[:200]!r} is a device, FIFO or other special file; a tenant's "
                                   "copy-in takes directories, regular files and links")
                files.pop(path, None)
                if info.isreg():
                    files[path] = member
                before = found.get(path)
                if before is not None and (before.kind == "dir") != (member.kind == "dir"):
                    raise _refused(f"{info.name[:200]!r} is named twice, as a directory and as a file or link")
                found[path] = member
    except tarfile.TarError as exc:
        raise OpError("bad_request", f"the body is not a tar archive this server can read: {exc}") from None
    for member in found.values():
        for depth in range(1, len(member.parts)):
            above = found.get(posixpath.join(dest, *member.parts[:depth]))
            if above is None or above.kind == "dir":
                continue
            if above.kind == "symlink":
                raise OpError("permission_denied", f"refused the archive, nothing was written: member {member.name[:200]!r} "
                              f"lies beneath {above.path}, a symbolic link of the same archive")
            raise _refused(f"member {member.name[:200]!r} lies beneath {above.path}, a file of the same archive")
    return list(found.values())


@dataclass
class _Plan:
    dirs: list[str]  # to make, parents first
    files: list[_Member]  # new ones first, then those replacing a file
    links: list[_Member]
    modes: dict[str, int]  # of each file to be replaced: its permission bits (a tenant sets no set-id bit)


async def _look(live: Live, paths: Iterable[str]) -> dict[str, StatResult]:
    """What the session holds at each path now (a final link not followed)."""
    found: dict[str, StatResult] = {}
    pending = iter(paths)

    async def worker() -> None:
        for path in pending:
            found[path] = await live.agent.stat(path, follow=False, nearest=True, writable=True)

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(LOOKS_AT_ONCE):
                tg.start_soon(worker)
    except* CaissonError as group:
        raise group.exceptions[0] from None  # as one look would raise it (an error the routes answer)
    return found


def _obstacle(path: str, kind: Kind, st: StatResult) -> OpError | None:
    """Why what the session holds at ``path`` keeps a ``kind`` (``dir``: a directory the copy
    makes or writes in) from landing there as decided."""
    if not st.exists:
        if st.nearest is not None and normalize(st.nearest) == path:
            return None
        return OpError("permission_denied", f"refused the archive, nothing was written: {path} is reached through a "
                       f"symbolic link in the session; a tenant writes only by real names: copy into the real path, or {INSTEAD}")
    if st.type == "symlink" and kind == "symlink":
        return None  # replaced: the link itself, never its target
    if st.type == "symlink" or st.realpath != path:
        return OpError("permission_denied", f"refused the archive, nothing was written: {path} is a symbolic link in the "
                       f"session, or reached through one; a tenant writes only by real names: copy into the real path, or {INSTEAD}")
    if kind == "dir":
        if st.type == "dir":
            return None
        return OpError("not_a_directory", f"refused the archive, nothing was written: {path} is a file in the session, "
                       "where the archive needs a directory; remove it first, or copy elsewhere")
    if st.type == "dir":
        return OpError("is_a_directory", f"refused the archive, nothing was written: {path} is a directory in the "
                       "session, where the archive has a file or link; remove it first, or copy elsewhere")
    if kind == "file" and st.type != "file":
        return OpError("permission_denied", f"refused the archive, nothing was written: {path} is a special file in the session; "
                       "remove it first, or copy elsewhere")
    if kind == "file" and st.nlink > 1:
        return OpError("permission_denied", f"refused the archive, nothing was written: {path} has other names in the "
                       f"session (hard links), which a write would change too; {INSTEAD}")
    if kind == "file" and st.writable is False:
        return OpError("permission_denied", f"refused the archive, nothing was written: {path} is a file the agent "
                       "may not write; leave it out of the archive, or copy elsewhere")
    return None


async def _plan(live: Live, dest: str, dest_st: StatResult, members: list[_Member]) -> _Plan:
    """Every member's landing decided against what the session holds, before anything is written."""
    dirs: dict[str, None] = {dest: None}
    if not dest_st.exists:  # its missing parents are made too
        above = posixpath.dirname(dest)
        while above != "/" and not (await live.agent.stat(above, follow=False)).exists:
            dirs[above] = None
            above = posixpath.dirname(above)
    for m in members:
        for depth in range(1, len(m.parts)):
            dirs[posixpath.join(dest, *m.parts[:depth])] = None
        if m.kind == "dir":
            dirs[m.path] = None
    others = [m for m in members if m.kind != "dir"]
    seen = await _look(live, [*dirs, *(m.path for m in others)])
    for path in dirs:
        if (why := _obstacle(path, "dir", seen[path])) is not None:
            raise why
    for m in others:
        if (why := _obstacle(m.path, m.kind, seen[m.path])) is not None:
            raise why
    files = [m for m in others if m.kind == "file"]
    return _Plan(
        dirs=sorted((path for path in dirs if not seen[path].exists), key=lambda p: (p.count("/"), p)),
        # New files first: a stop for space before any existing file is replaced keeps them all.
        files=[m for m in files if not seen[m.path].exists] + [m for m in files if seen[m.path].exists],
        links=[m for m in others if m.kind == "symlink"],
        modes={m.path: seen[m.path].mode & 0o777 for m in files if seen[m.path].exists},
    )


@dataclass(frozen=True)
class _Old:
    """An existing file the copy-in replaced: what to put back, and what the copy-in wrote."""

    content: bytes
    mode: int
    written_sha256: str


@dataclass
class _Progress:
    made: list[str] = field(default_factory=list)  # anew by this copy-in
    replaced: list[str] = field(default_factory=list)  # an existing file or link overwritten, its old content not kept
    olds: dict[str, _Old] = field(default_factory=dict)  # an existing file overwritten, its old content kept
    at: str = ""

    def stopped(self, kept: list[str], lost: list[str]) -> str:
        said = f"the copy-in stopped at {self.at}: "
        if kept:
            said += (f"of the {len(self.made)} files, directories and links it had made, these could not be removed "
                     f"again and stay: {_named(kept)}")
        else:
            said += (f"nothing of the archive was kept (the {len(self.made)} files, directories and links it had made "
                     "are removed again")
            said += f", and the existing files it had replaced ({len(self.olds)}) have their old content back)" if self.olds and not lost else ")"
        gone = self.replaced + lost
        if gone:
            said += (f"; {'and' if kept else 'except'} these existing files or links it had already overwritten, whose "
                     f"old content is gone: {_named(gone)}")
        return said


def _named(paths: list[str]) -> str:
    return ", ".join(paths[:NAMED]) + (f" and {len(paths) - NAMED} more" if len(paths) > NAMED else "")


async def _undo(live: Live, made: list[str]) -> list[str]:
    """What a copy-in made, removed again deepest first, each removal plain (a link the agent
    swaps in on the way refuses it, so the clean-up cannot be pointed elsewhere), a directory
    only when empty; returns what stays, and why."""
    kept: list[str] = []
    for path in sorted(made, key=lambda p: p.count("/"), reverse=True):
        try:
            await live.agent.remove(path, missing_ok=True, plain=True)
        except CaissonError as exc:
            kept.append(f"{path} ({exc})")
    return kept


async def _restore(live: Live, olds: dict[str, _Old]) -> list[str]:
    """The replaced files' old content and mode put back, each only if it still holds what the
    copy-in wrote (a later change of the agent's stays), each write plain; returns those that
    could not be, and why."""
    lost: list[str] = []
    for path, old in olds.items():
        try:
            await live.agent.write_file(path, old.content, mode=old.mode, plain=True, expected_sha256=old.written_sha256)
        except CaissonError as exc:
            lost.append(f"{path} ({exc})")
    return lost


async def _land(live: Live, tar: tarfile.TarFile, plan: _Plan) -> None:
    done = _Progress()
    try:
        for path in plan.dirs:
            done.at = path
            if await plain(live.agent.mkdir(path, parents=False, exist_ok=True, plain=True)):
                done.made.append(path)
        for m in plan.files:
            done.at = m.path
            assert m.content is not None  # a file's
            data = await anyio.to_thread.run_sync(_content, tar, m.content)
            written = await plain(live.agent.write_file(m.path, data, mode=m.mode, plain=True, keep_old=KEEP_OLD))
            if written.created:
                done.made.append(m.path)
            elif written.old is not None:
                done.olds[m.path] = _Old(written.old, plan.modes.get(m.path, m.mode), written.sha256)
            else:
                done.replaced.append(m.path)
        for m in plan.links:
            done.at = m.path
            where, name = posixpath.split(m.path)
            (done.made if await _link(live, where, name, m.target) else done.replaced).append(m.path)
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            kept = await _undo(live, done.made)
            lost = await _restore(live, done.olds)
        if isinstance(exc, OpError):
            raise OpError(exc.code, f"{exc.message}; {done.stopped(kept, lost)}") from None
        raise


async def copy_in(live: Live, chunks: AsyncIterator[bytes], dest: str) -> None:
    """A tar stream extracted into ``dest`` as the agent's files, once every member's place is
    decided. Symbolic links are made last (so nothing is written through one), each in its
    directory as decided, by a command whose only write root that directory is."""
    dest_real, st = await landing(live, dest)
    if st.exists and st.type != "dir":
        raise OpError("not_a_directory", f"{dest} is not a directory")
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        async for chunk in chunks:
            await anyio.to_thread.run_sync(spool.write, chunk)
        spool.seek(0)
        members = await anyio.to_thread.run_sync(_members, spool, dest_real)
        check(live, *(m.path for m in members))
        plan = await _plan(live, dest_real, st, members)
        spool.seek(0)
        with tarfile.open(fileobj=spool, mode="r:*") as tar:
            await _land(live, tar, plan)


def _content(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    source = tar.extractfile(member)
    assert source is not None  # a regular file's
    return source.read()


# Makes a symbolic link in a directory opened without following a link, and refuses one reached
# through a link on the way (the descriptor's name is then not the one decided on). Says
# whether the name was new.
_LINK = """
import os, sys
where, name, target = sys.argv[1:]
try:
    fd = os.open(where, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
except OSError:
    sys.exit(where + " is no directory now (a symbolic link or a file may have been swapped in)")
if os.readlink("/proc/self/fd/%d" % fd) != where:
    sys.exit(where + " is reached through a symbolic link")
try:
    os.symlink(target, name, dir_fd=fd)
    print("new")
except FileExistsError:
    os.unlink(name, dir_fd=fd)
    os.symlink(target, name, dir_fd=fd)
    print("replaced")
"""


async def _link(live: Live, where: str, name: str, target: str) -> bool:
    """A symbolic link made by the agent in ``where`` as decided, the kernel letting it write
    there alone; whether the name was new."""
    cfg = live.session.config
    maker = live.session.confined(Confinement(user=cfg.agent_user, level="cautious", write_roots=(where,), network=False))
    done = await maker.exec(["python3", "-c", _LINK, where, name, target], cwd="/", timeout=30)
    if done.exit_code != 0:
        raise OpError("copy_failed", f"making the link {where}/{name} failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip() == "new"
