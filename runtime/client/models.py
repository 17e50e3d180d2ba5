"""Pydantic models for what session primitives return. Replies from the daemon are
validated into these, so a lying daemon produces a clear error instead of bad data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FileType = Literal["file", "dir", "symlink", "other"]


class _Reply(BaseModel):
    # Unknown keys from the daemon are ignored; wrong types for known keys are errors.
    model_config = ConfigDict(extra="ignore", frozen=True)


class DaemonInfo(_Reply):
    version: str
    protocol: int
    python: str
    rg: str | None
    pid: int
    uid: int
    # The kernel's Landlock ABI as seen in the container; 0 = no Landlock.
    landlock: int = 0
    # What enforces the levels on commands: "landlock", "views" (read-only views and
    # chroot, where there is no Landlock: gVisor), or None (nothing: every command counts
    # as dangerous).
    levels: Literal["landlock", "views"] | None = None
    # Whether the daemon has clone-exec, its native spawner (used where the kernel honours
    # CLONE_PARENT: not under gVisor, whose clones the daemon forks itself).
    clone_exec: bool = False


class Confinement(BaseModel):
    """What the kernel lets one tool call's work do, as the policy approved it."""

    model_config = ConfigDict(frozen=True)

    # File ops open paths as this user, commands run as this user.
    user: str
    # File ops: paths must resolve beneath one of these (None: wherever the user may go).
    roots: tuple[str, ...] | None = None
    # Commands: safe may write nothing, cautious only beneath write_roots, dangerous as the user.
    level: Literal["safe", "cautious", "dangerous"] = "safe"
    write_roots: tuple[str, ...] = ()
    # Cautious commands: directories whose existing entries, not themselves, they may write
    # beneath (the agent's home: not its dot entries, `bin`, links or files with two names).
    entry_roots: tuple[str, ...] = ()
    network: bool = False
    # The session's egress relay on loopback: the one TCP port commands may connect to.
    egress_port: int = 0
    # Whether commands may change modes, owners, times and extended attributes (a seccomp
    # filter in the daemon forbids them where not); None: all but safe may.
    metadata: bool | None = None
    # File ops: each path the policy decided on -> the real paths it saw there (what the path
    # resolves to; for a link, the link too). The daemon refuses (conflict) a path that has
    # come to reach anything else: a link swapped since cannot carry the call elsewhere.
    decided: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def writable(self, *dirs: str) -> Confinement:
        """The same, plus writes beneath ``dirs``: a tool's own bookkeeping (the shell's saved
        state) that even a read-only command must be able to leave."""
        if self.level == "dangerous":
            return self
        roots = None if self.roots is None else (*self.roots, *dirs)
        write_roots = dirs if self.level == "safe" else (*self.write_roots, *dirs)
        entry_roots = () if self.level == "safe" else self.entry_roots
        # A safe command kept writable for bookkeeping still changes no metadata.
        metadata = False if self.level == "safe" else self.metadata
        return self.model_copy(
            update={
                "level": "cautious", "write_roots": write_roots, "entry_roots": entry_roots, "roots": roots,
                "metadata": metadata,
            }
        )

    def command_rules(self) -> dict[str, object]:
        metadata = self.level != "safe" if self.metadata is None else self.metadata
        rules: dict[str, object] = {
            "level": self.level, "write_roots": list(self.write_roots), "network": self.network, "metadata": metadata,
        }
        if self.entry_roots:
            rules["entry_roots"] = list(self.entry_roots)
        return rules | ({"egress_port": self.egress_port} if self.egress_port else {})


class _FileMeta(_Reply):
    """What stat and list both tell about a file."""

    type: FileType | None = None
    size: int = 0
    mode: int = 0
    mtime: float = 0.0
    uid: int = 0
    gid: int = 0
    # Names the file has (hard links).
    nlink: int = 1
    target: str | None = None


class StatResult(_FileMeta):
    exists: bool
    realpath: str | None = None
    # For a symbolic link at the end: the link's own real path.
    entry: str | None = None
    # Asked for with ``read``: the head of a regular file the caller can read (None: not read),
    # and when it is the whole file, its hash.
    read_eof: bool | None = None
    sha256: str | None = None
    head: bytes = b""
    # Asked for with ``nearest``, for a missing path: the real path a new file there would have.
    nearest: str | None = None
    # Asked for with ``writable``, for a regular file: whether the caller may open it for writing.
    writable: bool | None = None


class ReadResult(_Reply):
    data: bytes
    size: int = Field(description="size of the whole file")
    offset: int
    eof: bool
    sha256: str | None = None


class WriteResult(_Reply):
    created: bool
    size: int
    sha256: str
    # Asked for with ``keep_old``: the replaced content's hash ("" when there was none) and
    # the content itself when it was small enough to keep.
    old_sha256: str | None = None
    old: bytes | None = None


class DirEntry(_FileMeta):
    name: str
    type: FileType


class WalkEntry(_Reply):
    path: str
    type: FileType
    size: int = 0
    mtime: float = 0.0
    # Asked for with ``detail``: permission bits, and a symbolic link's target.
    mode: int | None = None
    target: str | None = None


class WalkResult(_Reply):
    entries: list[WalkEntry]
    ignore: dict[str, str] = Field(default_factory=dict)
    truncated: bool = False


class ExecResult(_Reply):
    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    stdout_total: int = 0
    stderr_total: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration: float = 0.0


class SpawnResult(_Reply):
    task_id: str
    pid: int


class TaskOutput(_Reply):
    stdout: str
    stderr: str
    stdout_offset: int
    stderr_offset: int
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    running: bool
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False


class TaskInfo(_Reply):
    task_id: str
    pid: int
    name: str | None = None
    command: str | list[str] | None = None
    running: bool
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    started: float
    ended: float | None = None
    stdout_total: int = 0
    stderr_total: int = 0


class GrepHit(_Reply):
    line: int
    end_line: int
    column: int
    lines: list[str]
    before: list[tuple[int, str]]
    after: list[tuple[int, str]]


class GrepFile(_Reply):
    path: str
    count: int
    truncated: bool
    matches: list[GrepHit]
    # Names of the file (hard links): another may be a secret's.
    nlink: int = 1


class GrepResult(_Reply):
    engine: Literal["rg", "python"]
    files: list[GrepFile] = []  # content mode
    paths: list[str] = []  # files and count modes, sorted
    counts: list[int] = []  # count mode: the matches in each of paths
    # Those of paths with more than one name: another may be a secret's.
    linked: list[str] = []
    truncated: bool
    timed_out: bool

    def without(self, root: str, hidden: Callable[[str], bool]) -> GrepResult:
        """The result less the files ``hidden`` names (given their full path; the daemon's are
        relative to ``root``) and the files with other names (another may be hidden's)."""
        prefix = root.rstrip("/") + "/"
        if self.files:
            return self.model_copy(update={"files": [f for f in self.files if f.nlink <= 1 and not hidden(prefix + f.path)]})
        linked = set(self.linked)
        keep = [i for i, path in enumerate(self.paths) if path not in linked and not hidden(prefix + path)]
        counts = [self.counts[i] for i in keep] if self.counts else []
        return self.model_copy(update={"paths": [self.paths[i] for i in keep], "counts": counts, "linked": []})


class FindResult(_Reply):
    total: int
    files: list[tuple[str, float]]  # (path relative to the root, mtime) of one page
    timed_out: bool


class NetRead(_Reply):
    data: bytes
    eof: bool  # the program shut its side, or reset
    idle: bool  # nothing came within the wait


class StreamEvent(BaseModel):
    """One piece of a streamed command: output of one stream at its byte offset, then the exit."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["stdout", "stderr", "exit"]
    data: str = ""
    offset: int = 0
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
