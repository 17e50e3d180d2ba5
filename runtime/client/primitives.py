"""The primitive client of one session's daemon: exec, read, write, list, spawn, tasks...

Each method is one (or, for large files, a few) framed requests over the session's channel;
every request is checked against its op's declaration (``caisson._sandbox.opspec``, the
daemon's own) before it is sent, and every reply is validated before it is returned.
Relative paths resolve against ``cwd``, the session's working directory, which the bash
tool moves.

A client made by :meth:`SandboxClient.confined` does the same work as the agent: its file ops
open paths with the agent user's credentials beneath the roots the policy approved, and its
commands run as the agent under the Landlock level the policy approved. Tools only ever get
such a client; root's file access stays with the embedding program's own calls.
"""

from __future__ import annotations

import contextlib
import posixpath
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from caisson._sandbox import opspec
from caisson._sandbox.errors import DaemonError
from caisson.client.models import (
    Confinement,
    DaemonInfo,
    DirEntry,
    ExecResult,
    FindResult,
    GrepResult,
    NetRead,
    ReadResult,
    SpawnResult,
    StatResult,
    StreamEvent,
    TaskInfo,
    TaskOutput,
    WalkResult,
    WriteResult,
)
from caisson.config import SessionConfig
from caisson.errors import CaissonError, CallTimeout, DaemonProtocolError, OpError
from caisson.transport.channel import Channel

M = TypeVar("M", bound=BaseModel)

# Large files move in pieces, so no single frame approaches the reply limit.
CHUNK = 8 * 1024 * 1024
# Room a reply frame keeps for its header: outputs that would not fit beside it move in chunks.
FRAME_HEADROOM = 1024 * 1024
# Extra time the daemon gets past a command's own timeout to kill the tree and reply.
EXEC_GRACE = 10.0
# Extra time past a search's own timeout, for the daemon to stop it and reply.
SEARCH_GRACE = 15.0


def new_session_id() -> str:
    return "s-" + uuid.uuid4().hex[:12]


class _Shared:
    """What a session's client and its confined views see alike."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.info: DaemonInfo | None = None


class SandboxClient:
    """Primitive operations on one session's container, done by its daemon."""

    def __init__(
        self,
        *,
        session_id: str,
        container_id: str,
        config: SessionConfig,
        channel: Channel,
        confinement: Confinement | None = None,
        _shared: _Shared | None = None,
    ) -> None:
        self.id = session_id
        self.container_id = container_id
        self.config = config
        self.channel = channel
        self.confinement = confinement
        self._shared = _shared or _Shared(config.workdir)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} container={self.container_id[:12]}>"

    @property
    def cwd(self) -> str:
        """The working directory relative paths resolve against; the bash tool moves it."""
        return self._shared.cwd

    @cwd.setter
    def cwd(self, value: str) -> None:
        self._shared.cwd = value

    @property
    def info(self) -> DaemonInfo | None:
        """The daemon's answer to the last ping (version, ripgrep, Landlock ABI)."""
        return self._shared.info

    def confined(self, confinement: Confinement) -> SandboxClient:
        """A view of this session that works as the agent, within ``confinement``."""
        return SandboxClient(
            session_id=self.id,
            container_id=self.container_id,
            config=self.config,
            channel=self.channel,
            confinement=confinement,
            _shared=self._shared,
        )

    def writable(self, *dirs: str) -> SandboxClient:
        """This client, allowed to write beneath ``dirs`` too (see Confinement.writable)."""
        return self if self.confinement is None else self.confined(self.confinement.writable(*dirs))

    # ---- plumbing -------------------------------------------------------------------

    async def op(
        self, op: str, args: dict[str, Any] | None = None, blob: bytes = b"", *, timeout: float | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """Send one primitive to the daemon; raw result dict and blob. A request its op's
        declaration refuses fails here (``bad_request``, the daemon's own message), unsent."""
        if self.confinement is not None:
            args = self._confine(op, args or {})
        try:
            opspec.check(op, args or {})
        except DaemonError as exc:
            raise OpError(exc.code, exc.message) from None
        return await self.channel.call(op, args, blob, timeout=timeout or self.config.call_timeout)

    def _confine(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        c = self.confinement
        assert c is not None
        # Ops that open paths go with the agent's credentials and roots.
        if op in opspec.FILE_OPS:
            args = {**args, "as_user": c.user, "roots": list(c.roots) if c.roots is not None else None}
            if c.decided:
                args["decided"] = {path: list(real) for path, real in c.decided}
            return args
        if op in opspec.COMMAND_OPS:
            if args.get("user") not in (None, c.user):
                raise OpError("permission_denied", f"commands of a tool run as {c.user}, not as {args['user']}")
            return {**args, "user": c.user, "confine": c.command_rules()}
        return args

    def _model(self, model: type[M], op: str, data: dict[str, Any]) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise DaemonProtocolError(
                f"daemon of session {self.id} sent an invalid {op} reply: {exc.errors()[0]['msg']}"
            ) from None

    def _split(self, op: str, result: dict[str, Any], blob: bytes) -> tuple[str, str]:
        first = result.get("stdout_len", 0)
        if not isinstance(first, int) or not 0 <= first <= len(blob):
            raise DaemonProtocolError(f"daemon of session {self.id} sent an invalid {op} reply (stdout_len)")
        return blob[:first].decode("utf-8", "replace"), blob[first:].decode("utf-8", "replace")

    def resolve(self, path: str) -> str:
        """A container path, relative ones against the session's working directory."""
        return posixpath.normpath(posixpath.join(self.cwd, path))

    # ---- primitives -------------------------------------------------------------------

    def _command_env(self, env: dict[str, str] | None) -> dict[str, str]:
        """The session's environment, then the call's: it travels with each command, never in
        the daemon's own environment (which gVisor lets the agent read in /proc/1/environ)."""
        return {**self.config.proxy_env(), **self.config.env, **(env or {})}

    async def ping(self, *, timeout: float | None = None) -> DaemonInfo:
        result, _ = await self.op("ping", timeout=timeout)
        self._shared.info = self._model(DaemonInfo, "ping", result)
        return self._shared.info

    async def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
        stdout_max: int = 1024 * 1024,
        stderr_max: int = 1024 * 1024,
    ) -> ExecResult:
        """Run a bash command (str) or an argv (list); wait for it; output decoded as UTF-8."""
        args: dict[str, Any] = {"argv": command} if isinstance(command, list) else {"command": command}
        args.update(
            cwd=self.resolve(cwd) if cwd else self.cwd,
            env=self._command_env(env),
            timeout=timeout,
            stdout_max=stdout_max,
            stderr_max=stderr_max,
        )
        if user is not None:
            args["user"] = user
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        deadline = (timeout if timeout is not None else 24 * 3600) + EXEC_GRACE
        if len(data) > CHUNK or stdout_max + stderr_max > self.config.max_frame - FRAME_HEADROOM:
            return await self._exec_in_chunks(args, data, deadline)
        result, blob = await self.op("exec", args, data, timeout=deadline)
        stdout, stderr = self._split("exec", result, blob)
        return self._model(ExecResult, "exec", {**result, "stdout": stdout, "stderr": stderr})

    async def _exec_in_chunks(self, args: dict[str, Any], stdin: bytes, deadline: float) -> ExecResult:
        """``exec`` whose stdin or output would not fit one frame: a head-keeping task, its
        stdin written and its output read in chunks, then forgotten."""
        out_max, err_max = args.pop("stdout_max"), args.pop("stderr_max")
        started = time.monotonic()
        spawned, _ = await self.op("spawn", {**args, "output_max": max(out_max, err_max), "keep": "head"})
        task_id = str(spawned.get("task_id"))
        try:
            with contextlib.suppress(OpError):  # a command that stops reading its stdin: its business
                for start in range(0, max(len(stdin), 1), CHUNK):
                    final = start + CHUNK >= len(stdin)
                    await self.op("task_write", {"task_id": task_id, "close": final}, stdin[start : start + CHUNK])
            status, _ = await self.op("task_wait", {"task_id": task_id, "timeout": deadline}, timeout=deadline)
            if status.get("running"):
                raise CallTimeout(f"exec on session {self.id} did not finish within {deadline:g} s")
            totals = int(status.get("stdout_offset", 0)), int(status.get("stderr_offset", 0))
            stdout = await self._drain(task_id, "stdout", min(totals[0], out_max), totals)
            stderr = await self._drain(task_id, "stderr", min(totals[1], err_max), totals)
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(CaissonError):
                await self.task_forget(task_id)
        return self._model(ExecResult, "exec", {
            **{k: status.get(k) for k in ("exit_code", "signal", "timed_out")},
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": stderr.decode("utf-8", "replace"),
            "stdout_total": totals[0], "stderr_total": totals[1],
            "stdout_truncated": totals[0] > out_max, "stderr_truncated": totals[1] > err_max,
            "duration": round(time.monotonic() - started, 6),
        })

    async def _drain(self, task_id: str, stream: str, kept: int, totals: tuple[int, int]) -> bytes:
        """The first ``kept`` bytes of one of a finished task's streams, a chunk per call."""
        parts: list[bytes] = []
        got = 0
        while got < kept:
            offsets = {"stdout_offset": totals[0], "stderr_offset": totals[1], f"{stream}_offset": got}
            result, blob = await self.op(
                "task_read", {"task_id": task_id, **offsets, "max_bytes": min(CHUNK, kept - got)}
            )
            first = result.get("stdout_len", 0)
            piece = blob[:first] if stream == "stdout" else blob[first:]
            if not piece:
                break
            parts.append(piece[: kept - got])
            got += len(piece)
        return b"".join(parts)

    async def stat(
        self, path: str, *, follow: bool = True, read: int = 0, nearest: bool = False, writable: bool = False
    ) -> StatResult:
        """``read``: also the first ``read`` bytes of a regular file the caller can read (``head``,
        from the very file ``realpath`` names). ``nearest``: a missing path also gives the real
        path a new file there would have. ``writable``: a regular file also gives whether the
        caller may open it for writing. Each saves the caller's next round trip."""
        args: dict[str, Any] = {"path": self.resolve(path), "follow": follow}
        if read:
            args["read"] = read
        if nearest:
            args["nearest"] = True
        if writable:
            args["writable"] = True
        result, head = await self.op("stat", args)
        return self._model(StatResult, "stat", {**result, "head": head})

    async def read_range(
        self,
        path: str,
        offset: int = 0,
        length: int = -1,
        *,
        hash: bool = False,
        max_size: int | None = None,
        plain: bool = False,
    ) -> ReadResult:
        """One byte range of a file (at most one chunk), with the file's size and optional sha256.
        ``max_size``: refuse (``output_limit``) a file larger than that, unread. ``plain``:
        refuse (``not_plain``) a path reached through a symbolic link, or a file with other
        names (for files a tool reads without the policy's look at their path)."""
        if length < 0 or length > CHUNK:
            length = CHUNK
        args: dict[str, Any] = {"path": self.resolve(path), "offset": offset, "length": length, "hash": hash}
        if max_size is not None:
            args["max_size"] = max_size
        if plain:
            args["plain"] = True
        result, blob = await self.op("read", args)
        if len(blob) > length:
            raise DaemonProtocolError(f"daemon of session {self.id} returned more bytes than asked")
        return self._model(ReadResult, "read", {**result, "data": blob})

    async def read_file(self, path: str, offset: int = 0, length: int = -1, *, max_size: int | None = None) -> bytes:
        """Bytes of a file (or a range of it), fetched in chunks. ``max_size``: a file larger
        than that fails the call with ``output_limit`` (checked on every chunk: it may grow)."""
        parts: list[bytes] = []
        want = length
        while True:
            piece = await self.read_range(path, offset, CHUNK if want < 0 else min(want, CHUNK), max_size=max_size)
            parts.append(piece.data)
            offset += len(piece.data)
            if want >= 0:
                want -= len(piece.data)
            if piece.eof or not piece.data or want == 0:
                return b"".join(parts)

    async def write_file(
        self,
        path: str,
        data: bytes | str,
        *,
        expected_sha256: str | None = None,
        mode: int | None = None,
        parents: bool = True,
        owner: str | None = None,
        plain: bool = False,
        keep_old: int | None = None,
    ) -> WriteResult:
        """Write atomically (temp file + rename). ``expected_sha256``: compare-and-swap on the
        current content ("" = the file must not exist). ``plain``: refuse (``not_plain``) a
        path reached through a symbolic link, or a file with other names. ``keep_old``: also
        return what was replaced (its content when no larger than this)."""
        payload = data.encode() if isinstance(data, str) else data
        base: dict[str, Any] = {
            "path": self.resolve(path),
            "parents": parents,
            "owner": owner or self.config.agent_user,
            "expected_sha256": expected_sha256,
        }
        if mode is not None:
            base["mode"] = mode
        if plain:
            base["plain"] = True
        if keep_old is not None:
            base["keep_old"] = keep_old
        if len(payload) <= CHUNK:
            result, blob = await self.op("write", base, payload)
        else:
            upload = uuid.uuid4().hex
            for start in range(0, len(payload), CHUNK):
                final = start + CHUNK >= len(payload)
                result, blob = await self.op(
                    "write", {**base, "upload": upload, "final": final}, payload[start : start + CHUNK]
                )
        return self._model(WriteResult, "write", {**result, "old": blob} if result.get("old_kept") else result)

    async def list_dir(self, path: str) -> list[DirEntry]:
        result, _ = await self.op("list", {"path": self.resolve(path)})
        return [self._model(DirEntry, "list", e) for e in _as_list(result.get("entries"), self.id, "list")]

    async def walk(
        self, path: str, *, include_hidden: bool = False, max_entries: int = 200_000,
        ignore_files: tuple[str, ...] = (".gitignore",), detail: bool = False,
    ) -> WalkResult:
        result, _ = await self.op(
            "walk",
            {"path": self.resolve(path), "include_hidden": include_hidden, "max_entries": max_entries,
             "ignore_files": list(ignore_files), "detail": detail},
            timeout=max(self.config.call_timeout, 120.0),
        )
        return self._model(WalkResult, "walk", result)

    async def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True, plain: bool = False) -> bool:
        """Make a directory; ``plain``: refused (``not_plain``) where a symbolic link is on the way."""
        result, _ = await self.op("mkdir", {
            "path": self.resolve(path), "parents": parents, "exist_ok": exist_ok, "owner": self.config.agent_user,
            "plain": plain,
        })
        return bool(result.get("created"))

    async def remove(self, path: str, *, recursive: bool = False, missing_ok: bool = False, plain: bool = False) -> bool:
        """Remove a file, a link or a directory; ``plain``: refused (``not_plain``) where a
        symbolic link leads to the directory it is in."""
        result, _ = await self.op(
            "remove", {"path": self.resolve(path), "recursive": recursive, "missing_ok": missing_ok, "plain": plain}
        )
        return bool(result.get("removed"))

    async def rename(self, src: str, dst: str, *, overwrite: bool = True, plain: bool = False) -> None:
        """``plain``: refused (``not_plain``) where a symbolic link leads to the directory of ``src`` or ``dst``."""
        await self.op(
            "rename", {"src": self.resolve(src), "dst": self.resolve(dst), "overwrite": overwrite, "plain": plain}
        )

    async def spawn(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
        timeout: float | None = None,
        output_max: int = 8 * 1024 * 1024,
        name: str | None = None,
    ) -> SpawnResult:
        """Start a background task; its output is kept in the daemon, readable by offset."""
        args: dict[str, Any] = {"argv": command} if isinstance(command, list) else {"command": command}
        args.update(
            cwd=self.resolve(cwd) if cwd else self.cwd, env=self._command_env(env), timeout=timeout,
            output_max=output_max, name=name,
        )
        if user is not None:
            args["user"] = user
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        result, _ = await self.op("spawn", args, data)
        return self._model(SpawnResult, "spawn", result)

    async def exec_stream(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        poll: float = 1.0,
    ) -> AsyncIterator[StreamEvent]:
        """Run a command and yield its output as it comes (stdout and stderr with byte
        offsets), then its exit. Closing the stream early, or being cancelled, kills the command:
        ``async with contextlib.aclosing(s.exec_stream(...)) as events:`` closes it on leaving."""
        task = await self.spawn(command, cwd=cwd, env=env, timeout=timeout)
        out_at = err_at = 0
        done = False
        try:
            while True:
                chunk = await self.task_read(task.task_id, stdout_offset=out_at, stderr_offset=err_at, wait=poll)
                if chunk.stdout:
                    yield StreamEvent(kind="stdout", data=chunk.stdout, offset=out_at)
                if chunk.stderr:
                    yield StreamEvent(kind="stderr", data=chunk.stderr, offset=err_at)
                drained = chunk.stdout_offset == out_at and chunk.stderr_offset == err_at
                out_at, err_at = chunk.stdout_offset, chunk.stderr_offset
                if not chunk.running and drained:
                    done = True
                    yield StreamEvent(
                        kind="exit", exit_code=chunk.exit_code, signal=chunk.signal, timed_out=chunk.timed_out
                    )
                    return
        finally:
            if not done:
                with anyio.CancelScope(shield=True), contextlib.suppress(CaissonError):
                    await self.task_signal(task.task_id, "KILL")

    async def task_read(
        self, task_id: str, *, stdout_offset: int = 0, stderr_offset: int = 0,
        max_bytes: int = 1024 * 1024, wait: float = 0.0,
    ) -> TaskOutput:
        result, blob = await self.op(
            "task_read",
            {"task_id": task_id, "stdout_offset": stdout_offset, "stderr_offset": stderr_offset,
             "max_bytes": max_bytes, "wait": wait},
            timeout=self.config.call_timeout + wait,
        )
        stdout, stderr = self._split("task_read", result, blob)
        return self._model(TaskOutput, "task_read", {**result, "stdout": stdout, "stderr": stderr})

    async def task_write(self, task_id: str, data: bytes | str, *, close: bool = False) -> int:
        payload = data.encode() if isinstance(data, str) else data
        result, _ = await self.op("task_write", {"task_id": task_id, "close": close}, payload)
        return int(result.get("written", 0))

    async def task_signal(self, task_id: str, signal: str | int = "KILL", *, tree: bool = True) -> None:
        await self.op("task_signal", {"task_id": task_id, "signal": signal, "tree": tree})

    async def task_wait(self, task_id: str, timeout: float | None = None) -> TaskOutput:
        wait = 24 * 3600 if timeout is None else timeout
        result, _ = await self.op("task_wait", {"task_id": task_id, "timeout": wait}, timeout=wait + EXEC_GRACE)
        return self._model(
            TaskOutput, "task_wait",
            {"stdout": "", "stderr": "", "stdout_offset": 0, "stderr_offset": 0, **result},
        )

    async def task_forget(self, task_id: str) -> bool:
        """Drop a task and its kept output, killing it first if it still runs; whether it ran."""
        result, _ = await self.op("task_forget", {"task_id": task_id})
        return bool(result.get("killed"))

    async def task_list(self) -> list[TaskInfo]:
        result, _ = await self.op("task_list")
        return [self._model(TaskInfo, "task_list", t) for t in _as_list(result.get("tasks"), self.id, "task_list")]

    # ---- searches -------------------------------------------------------------------------

    async def grep(
        self,
        root: str,
        pattern: str,
        *,
        paths: Sequence[str] | None = None,
        engine: Literal["auto", "rg", "python"] = "auto",
        mode: Literal["content", "files", "count"] = "content",
        fixed_strings: bool = False,
        ignore_case: bool = False,
        multiline: bool = False,
        globs: Sequence[str] = (),
        type_globs: Sequence[str] = (),
        hidden: bool = False,
        no_ignore: bool = False,
        max_total: int = 1000,
        max_per_file: int | None = None,
        max_line_chars: int = 2000,
        before: int = 0,
        after: int = 0,
        timeout: float | None = None,
    ) -> GrepResult:
        """Search file contents below ``root`` (results' paths are relative to it): ripgrep's
        own walk (``globs``, ``type_globs``, ``hidden``, ``no_ignore``), or the files ``paths``
        names (relative to ``root``; the Python engine needs them). No pattern check here:
        the search tools hold the dialect both engines share."""
        args: dict[str, Any] = {
            "root": self.resolve(root), "pattern": pattern, "engine": engine, "mode": mode,
            "fixed_strings": fixed_strings, "ignore_case": ignore_case, "multiline": multiline,
            "max_total": max_total, "max_per_file": max_per_file, "max_line_chars": max_line_chars,
            "before": before, "after": after, "timeout": timeout,
        }
        blob = b""
        if paths is not None:
            args["paths_in_blob"] = True
            blob = "\0".join(paths).encode("utf-8", "surrogateescape")
        else:
            args.update(globs=list(globs), type_globs=list(type_globs), hidden=hidden, no_ignore=no_ignore)
        wait = (self.config.call_timeout if timeout is None else timeout) + SEARCH_GRACE
        result, _ = await self.op("grep", args, blob, timeout=wait)
        return self._model(GrepResult, "grep", result)

    async def find(
        self,
        root: str,
        regex: str,
        *,
        globs: Sequence[str] = (),
        type_globs: Sequence[str] = (),
        hidden: bool = False,
        no_ignore: bool = False,
        sort: Literal["modified", "path"] = "modified",
        offset: int = 0,
        limit: int = 1000,
        timeout: float | None = None,
    ) -> FindResult:
        """Files below ``root`` whose relative path fully matches ``regex`` (ripgrep's walk, as
        ``grep``'s), newest first or by path: the total and one page of (path, mtime)."""
        args: dict[str, Any] = {
            "root": self.resolve(root), "regex": regex, "globs": list(globs), "type_globs": list(type_globs),
            "hidden": hidden, "no_ignore": no_ignore, "sort": sort, "offset": offset, "limit": limit,
            "timeout": timeout,
        }
        wait = (self.config.call_timeout if timeout is None else timeout) + SEARCH_GRACE
        result, _ = await self.op("find", args, timeout=wait)
        return self._model(FindResult, "find", result)

    # ---- the egress relay (the daemon's loopback listener; see caisson.egress) --------------

    async def net_listen(self, port: int) -> int:
        """Have the daemon listen on its loopback at ``port``; where it listens."""
        result, _ = await self.op("net_listen", {"port": port})
        return int(result.get("port", 0))

    async def net_accept(self, wait: float) -> int:
        """The next connection a program opened (its id), 0 when none came within ``wait``."""
        result, _ = await self.op("net_accept", {"wait": wait}, timeout=self.config.call_timeout + wait)
        return self._model(_Accepted, "net_accept", result).conn

    async def net_read(self, conn: int, size: int, wait: float) -> NetRead:
        """Up to ``size`` bytes a program sent on ``conn``, waiting up to ``wait`` seconds for some."""
        result, data = await self.op(
            "net_read", {"conn": conn, "max": size, "wait": wait}, timeout=self.config.call_timeout + wait
        )
        return self._model(NetRead, "net_read", {**result, "data": data})

    async def net_write(self, conn: int, data: bytes, *, timeout: float | None = None) -> bool:
        """Send ``data`` to the program on ``conn``, whole; False when it is gone or stopped reading."""
        result, _ = await self.op("net_write", {"conn": conn}, data, timeout=timeout)
        return not self._model(_Written, "net_write", result).closed

    async def net_close(self, conn: int, how: Literal["both", "write"] = "both", *, timeout: float | None = None) -> None:
        """``both``: forget ``conn``; ``write``: tell its program the far end is done sending."""
        await self.op("net_close", {"conn": conn, "how": how}, timeout=timeout)

class _Accepted(BaseModel):
    conn: int


class _Written(BaseModel):
    closed: bool


def _as_list(value: Any, session_id: str, op: str) -> list[Any]:
    if not isinstance(value, list):
        raise DaemonProtocolError(f"daemon of session {session_id} sent an invalid {op} reply")
    return value
