"""``RemoteRuntime`` and ``RemoteSession``: the library's session interface over the hosted
API (httpx). Replies are validated into the library's own models, and errors become the
library's errors (an operation's ``OpError`` keeps its code), so code written against a
local ``Runtime`` runs unchanged against a server."""

from __future__ import annotations

import base64
import contextlib
import os
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx

from caisson.client.archive import CopySource, read_whole, unpack_to, write_tar
from caisson.client.models import (
    DaemonInfo,
    DirEntry,
    ExecResult,
    FindResult,
    GrepResult,
    ReadResult,
    SpawnResult,
    StatResult,
    StreamEvent,
    TaskInfo,
    TaskOutput,
    WalkResult,
    WriteResult,
)
from caisson.client.primitives import CHUNK
from caisson.config import Limits, SessionConfig
from caisson.errors import CaissonError, CallTimeout, OpError, SessionError
from caisson.remote.sse import read_events
from caisson.tools.base import ToolResult
from caisson.workspace_diff import WorkspaceDiff

FORMATS = ("json_schema", "openai", "anthropic", "mcp")
# The version of the hosted API this client speaks; every path begins with it.
API = "/v1"
# A wait the server holds one request for (its limit); longer waits are several requests.
MAX_WAIT = 30.0
# SessionConfig fields the API takes when a session is opened.
SESSION_FIELDS = ("image", "profile", "ttl", "idle_timeout", "env", "gvisor", "network", "egress")


class RemoteError(CaissonError):
    """An answer of the server other than success: its HTTP status, error code and text."""

    def __init__(self, status: int, code: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status = status
        self.code = code
        self.retry_after = retry_after


# Codes of the server's own answers; any other 4xx code is the daemon's refusal of the
# operation, raised as the library raises it (OpError with that code). ``conflict`` is the
# daemon's (a compare-and-swap write): the server's own conflicts are on admin and approval
# routes this client does not call.
SERVER_CODES = frozenset({
    "unauthorized", "forbidden", "not_allowed", "quota_exceeded", "body_too_large", "invalid_request",
    "no_such_session", "no_such_snapshot", "no_such_approval", "no_such_call", "no_such_tenant", "no_such_key",
    "image_error", "docker_unavailable", "env_refused",
})


def _raise_for(r: httpx.Response) -> None:
    if r.is_success:
        return
    try:
        body = r.json()
        code, detail = str(body.get("error", "invalid_request")), str(body.get("detail", r.text))
    except (ValueError, AttributeError):
        code, detail = "error", r.text
    if r.status_code == 504:
        raise CallTimeout(detail)
    if r.status_code == 410:
        raise SessionError(detail)
    if r.status_code < 500 and code not in SERVER_CODES:
        raise OpError(code, detail)
    retry = r.headers.get("retry-after")
    raise RemoteError(r.status_code, code, detail, float(retry) if retry and retry.isdigit() else None)


class _ToHoldingReplica(httpx.AsyncBaseTransport):
    """Another replica of the control plane holds the session (421, with its address): every
    request, streamed ones included, is sent once more, there."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        location = response.headers.get("location")
        if response.status_code != 421 or not location:
            return response
        await response.aclose()
        url = httpx.URL(location)
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"host"] + [(b"Host", url.netloc)]
        moved = httpx.Request(request.method, url, headers=headers, stream=request.stream, extensions=request.extensions)
        return await self._inner.handle_async_request(moved)

    async def aclose(self) -> None:
        await self._inner.aclose()


class RemoteRuntime:
    """``async with RemoteRuntime(url, api_key) as rt: async with rt.session() as s: ...``"""

    def __init__(self, url: str, api_key: str, *, timeout: float = 300.0, verify: bool | str = True) -> None:
        self.url = url.rstrip("/")
        self._key = api_key
        self._timeout = timeout
        self._verify = verify
        self._http: httpx.AsyncClient | None = None
        self._schemas: dict[tuple[str, str], list[dict[str, Any]]] = {}

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise CaissonError("the RemoteRuntime is not open: use `async with RemoteRuntime(url, key) as rt`")
        return self._http

    async def __aenter__(self) -> RemoteRuntime:
        transport = httpx.AsyncHTTPTransport(
            verify=self._verify, limits=httpx.Limits(max_connections=200, max_keepalive_connections=100)
        )
        self._http = httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {self._key}"}, timeout=self._timeout,
            transport=_ToHoldingReplica(transport),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        r = await self.http.request(method, path, **kw)
        _raise_for(r)
        return r

    @asynccontextmanager
    async def session(self, config: SessionConfig | None = None, **overrides: Any) -> AsyncIterator[RemoteSession]:
        s = await self.open_session(config, **overrides)
        try:
            yield s
        finally:
            with anyio.CancelScope(shield=True):
                await s.close()

    async def open_session(
        self, config: SessionConfig | None = None, *, from_snapshot: str | None = None, **overrides: Any
    ) -> RemoteSession:
        """A session on the server; ``overrides`` are SessionConfig fields (image, profile, limits,
        ttl, idle_timeout, env, gvisor, network, egress), ``from_snapshot`` a snapshot id from ``snapshot()``."""
        cfg = SessionConfig.model_validate({**(config or SessionConfig()).model_dump(), **overrides})
        given = set(overrides) | (config.model_fields_set if config is not None else set())
        if unsupported := sorted(given - {*SESSION_FIELDS, "limits"}):
            # Silently dropping them would run the session other than asked.
            raise CaissonError(f"the hosted API does not take {', '.join(unsupported)}; the server decides them")
        body: dict[str, Any] = {k: getattr(cfg, k) for k in SESSION_FIELDS}
        if "limits" in overrides or config is not None:
            asked = overrides["limits"] if "limits" in overrides else config.limits if config is not None else Limits()
            named = Limits.model_validate(asked).model_fields_set
            if beyond := sorted(named - {"memory", "cpus", "pids", "disk"}):
                raise CaissonError(f"the hosted API does not take limits.{', limits.'.join(beyond)}; the server decides them")
            body["limits"] = {"memory": cfg.limits.memory, "cpus": cfg.limits.cpus, "pids": cfg.limits.pids}
            if "disk" in named:  # else the tenant's max_disk
                body["limits"]["disk"] = cfg.limits.disk
        if from_snapshot is not None:
            body["from_snapshot"] = from_snapshot
        info = (await self.request("POST", f"{API}/sessions", json=body)).json()
        return await self._attach(info)

    async def attach(self, session_id: str) -> RemoteSession:
        """An open session of this key's tenant, opened earlier (by this client, another one, or
        before a restart); its background tasks and their output are there. A closed or
        unknown one raises SessionError."""
        info = (await self.request("GET", f"{API}/sessions/{session_id}")).json()
        if info["state"] != "open":
            raise SessionError(f"session {session_id} is {info['state']}: open a new one")
        return await self._attach(info)

    async def _attach(self, info: dict[str, Any]) -> RemoteSession:
        profile = str(info["profile"])
        if (profile, FORMATS[0]) not in self._schemas:
            async def fetch(fmt: str) -> None:
                r = await self.request("GET", f"{API}/sessions/{info['id']}/tools", params={"format": fmt})
                self._schemas[(profile, fmt)] = r.json()

            async with anyio.create_task_group() as tg:
                for fmt in FORMATS:
                    tg.start_soon(fetch, fmt)
        return RemoteSession(self, str(info["id"]), profile)

    def schemas(self, profile: str, format: str) -> list[dict[str, Any]]:
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}")
        return self._schemas[(profile, format)]


class RemoteSession:
    def __init__(self, rt: RemoteRuntime, session_id: str, profile: str) -> None:
        self._rt = rt
        self.id = session_id
        self.profile = profile
        self._closed = False
        self._base = f"{API}/sessions/{session_id}"

    def __repr__(self) -> str:
        return f"<RemoteSession {self.id} at {self._rt.url}>"

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        return (await self._rt.request(method, self._base + path, **kw)).json()

    # ---- tools ----------------------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> ToolResult:
        return ToolResult.model_validate(await self._json("POST", "/calls", json={"tool": tool, "args": args or {}}))

    def tools(self, format: str = "json_schema") -> list[dict[str, Any]]:
        """This session's tools as ``openai``, ``anthropic``, ``mcp`` or ``json_schema`` definitions."""
        return self._rt.schemas(self.profile, format)

    # ---- primitives -----------------------------------------------------------------------

    async def ping(self, *, timeout: float | None = None) -> DaemonInfo:
        """The session's daemon answers: its version, protocol, and what enforces the levels."""
        wait = {} if timeout is None else {"timeout": timeout}
        return DaemonInfo.model_validate(await self._json("GET", "/ping", **wait))

    async def exec(
        self, command: str | list[str], *, timeout: float | None = 60.0, cwd: str | None = None,
        env: dict[str, str] | None = None, stdin: str | None = None,
    ) -> ExecResult:
        body = {"command": command, "timeout": timeout, "cwd": cwd, "env": env or {}, "stdin": stdin}
        return ExecResult.model_validate(await self._json("POST", "/exec", json=body))

    async def stat(self, path: str, *, follow: bool = True) -> StatResult:
        return StatResult.model_validate(await self._json("GET", "/stat", params={"path": path, "follow": follow}))

    async def read_range(self, path: str, offset: int = 0, length: int = -1, *, hash: bool = False) -> ReadResult:
        """One byte range of a file (at most 8 MiB), with the file's size and optional sha256."""
        params = {"path": path, "offset": offset, "length": length if 0 <= length <= CHUNK else CHUNK, "hash": hash}
        reply = await self._json("GET", "/range", params=params)
        return ReadResult.model_validate({**reply, "data": base64.b64decode(reply["data"])})

    async def read_file(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        r = await self._rt.request("GET", self._base + "/files", params={"path": path, "offset": offset, "length": length})
        return r.content

    async def write_file(
        self, path: str, data: bytes | str, *, expected_sha256: str | None = None, mode: int | None = None
    ) -> WriteResult:
        params: dict[str, Any] = {"path": path}
        if expected_sha256 is not None:
            params["expected_sha256"] = expected_sha256
        if mode is not None:
            params["mode"] = mode
        content = data.encode() if isinstance(data, str) else data
        return WriteResult.model_validate(await self._json("PUT", "/files", params=params, content=content))

    async def list_dir(self, path: str) -> list[DirEntry]:
        return [DirEntry.model_validate(e) for e in await self._json("GET", "/dir", params={"path": path})]

    async def walk(
        self, path: str, *, include_hidden: bool = False, max_entries: int = 200_000,
        ignore_files: tuple[str, ...] = (".gitignore",), detail: bool = False,
    ) -> WalkResult:
        params = {
            "path": path, "include_hidden": include_hidden, "max_entries": max_entries, "detail": detail,
            # One empty value asks for no ignore files (none at all would mean the default).
            "ignore_files": list(ignore_files) or [""],
        }
        return WalkResult.model_validate(await self._json("GET", "/walk", params=params))

    async def grep(
        self, root: str, pattern: str, *, paths: Sequence[str] | None = None,
        engine: Literal["auto", "rg", "python"] = "auto", mode: Literal["content", "files", "count"] = "content",
        fixed_strings: bool = False, ignore_case: bool = False, multiline: bool = False,
        globs: Sequence[str] = (), type_globs: Sequence[str] = (), hidden: bool = False, no_ignore: bool = False,
        max_total: int = 1000, max_per_file: int | None = None, max_line_chars: int = 2000,
        before: int = 0, after: int = 0, timeout: float | None = None,
    ) -> GrepResult:
        """As ``Session.grep``; the server leaves out files the secret policy hides."""
        body = {
            "root": root, "pattern": pattern, "paths": None if paths is None else list(paths), "engine": engine,
            "mode": mode, "fixed_strings": fixed_strings, "ignore_case": ignore_case, "multiline": multiline,
            "globs": list(globs), "type_globs": list(type_globs), "hidden": hidden, "no_ignore": no_ignore,
            "max_total": max_total, "max_per_file": max_per_file, "max_line_chars": max_line_chars,
            "before": before, "after": after, "timeout": timeout,
        }
        return GrepResult.model_validate(await self._json("POST", "/grep", json=body))

    async def find(
        self, root: str, regex: str, *, globs: Sequence[str] = (), type_globs: Sequence[str] = (),
        hidden: bool = False, no_ignore: bool = False, sort: Literal["modified", "path"] = "modified",
        offset: int = 0, limit: int = 1000, timeout: float | None = None,
    ) -> FindResult:
        body = {
            "root": root, "regex": regex, "globs": list(globs), "type_globs": list(type_globs), "hidden": hidden,
            "no_ignore": no_ignore, "sort": sort, "offset": offset, "limit": limit, "timeout": timeout,
        }
        return FindResult.model_validate(await self._json("POST", "/find", json=body))

    async def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> bool:
        body = {"path": path, "parents": parents, "exist_ok": exist_ok}
        return bool((await self._json("POST", "/mkdir", json=body))["created"])

    async def remove(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> bool:
        params = {"path": path, "recursive": recursive, "missing_ok": missing_ok}
        return bool((await self._json("DELETE", "/files", params=params))["removed"])

    async def rename(self, src: str, dst: str, *, overwrite: bool = True) -> None:
        await self._rt.request("POST", self._base + "/rename", json={"src": src, "dst": dst, "overwrite": overwrite})

    # ---- background tasks ----------------------------------------------------------------

    async def spawn(
        self, command: str | list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
        timeout: float | None = None, name: str | None = None, stdin: str | None = None,
    ) -> SpawnResult:
        body = {"command": command, "cwd": cwd, "env": env or {}, "timeout": timeout, "name": name, "stdin": stdin}
        return SpawnResult.model_validate(await self._json("POST", "/tasks", json=body))

    async def task_read(
        self, task_id: str, *, stdout_offset: int = 0, stderr_offset: int = 0,
        max_bytes: int = 1024 * 1024, wait: float = 0.0,
    ) -> TaskOutput:
        params = {
            "stdout_offset": stdout_offset, "stderr_offset": stderr_offset, "max_bytes": max_bytes,
            "wait": min(wait, MAX_WAIT),
        }
        return TaskOutput.model_validate(await self._json("GET", f"/tasks/{task_id}", params=params))

    async def task_write(self, task_id: str, data: bytes | str, *, close: bool = False) -> int:
        content = data.encode() if isinstance(data, str) else data
        reply = await self._json("POST", f"/tasks/{task_id}/stdin", params={"close": close}, content=content)
        return int(reply["written"])

    async def task_signal(self, task_id: str, signal: str | int = "KILL", *, tree: bool = True) -> None:
        await self._rt.request("POST", f"{self._base}/tasks/{task_id}/signal", json={"signal": signal, "tree": tree})

    async def task_wait(self, task_id: str, timeout: float | None = None) -> TaskOutput:
        """The task's end; after ``timeout`` seconds (None: no limit) its state so far."""
        deadline = None if timeout is None else anyio.current_time() + timeout
        while True:
            left = MAX_WAIT if deadline is None else max(0.0, min(MAX_WAIT, deadline - anyio.current_time()))
            state = TaskOutput.model_validate(await self._json("POST", f"/tasks/{task_id}/wait", params={"timeout": left}))
            if not state.running or (deadline is not None and anyio.current_time() >= deadline):
                return state

    async def task_list(self) -> list[TaskInfo]:
        return [TaskInfo.model_validate(t) for t in await self._json("GET", "/tasks")]

    async def exec_stream(
        self, command: str | list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The command's output as it comes, then its exit. A dropped connection is resumed
        from the last offsets (nothing lost or repeated); closing the stream early kills it."""
        body = {"command": command, "cwd": cwd, "env": env or {}, "timeout": timeout}
        task_id: str | None = None
        out_at = err_at = 0
        done = False
        try:
            while not done:
                if task_id is None:
                    request = self._rt.http.build_request("POST", self._base + "/exec-stream", json=body)
                else:
                    params = {"stdout_offset": out_at, "stderr_offset": err_at}
                    request = self._rt.http.build_request("GET", f"{self._base}/tasks/{task_id}/stream", params=params)
                try:
                    response = await self._rt.http.send(request, stream=True)
                    try:
                        if not response.is_success:
                            await response.aread()
                            _raise_for(response)
                        async for ev in read_events(response):
                            if ev.event == "task":
                                task_id = str(ev.data["task_id"])
                            elif ev.event in ("stdout", "stderr"):
                                yield StreamEvent(kind=ev.event, data=ev.data["data"], offset=ev.data["offset"])  # type: ignore[arg-type]
                                if ev.id:
                                    out_at, err_at = (int(p) for p in ev.id.split(":"))
                            elif ev.event == "exit":
                                done = True
                                yield StreamEvent(kind="exit", **ev.data)
                            elif ev.event == "error":
                                raise SessionError(str(ev.data.get("detail", "the stream failed")))
                    finally:
                        await response.aclose()
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    if task_id is None:
                        raise
                    # The connection dropped mid-stream: the task goes on; read on from the offsets.
        finally:
            if not done and task_id is not None:
                with anyio.CancelScope(shield=True), contextlib.suppress(CaissonError, httpx.HTTPError):
                    await self.task_signal(task_id)

    # ---- bulk copy ------------------------------------------------------------------------

    async def copy_in(self, source: CopySource, dest: str) -> None:
        """A host file or directory (or tar bytes, a binary file object of a tar, or a tar
        stream) into ``dest``, as the agent's files, all or nothing. A host file's other names
        (hard links) land as copies of it."""
        if isinstance(source, (str, os.PathLike)):
            source = await anyio.to_thread.run_sync(_tar_of_path, Path(source))
        elif not isinstance(source, (bytes, AsyncIterable)):
            # Whole, as a path's tar is (see _tar_of_path).
            source = await anyio.to_thread.run_sync(read_whole, source)
        await self._rt.request("POST", self._base + "/copy-in", params={"dest": dest}, content=source)

    async def copy_out(self, path: str) -> AsyncIterator[bytes]:
        """A container file or directory as a tar stream, in chunks."""
        async with self._rt.http.stream("GET", self._base + "/copy-out", params={"path": path}) as r:
            if not r.is_success:
                await r.aread()
                _raise_for(r)
            async for chunk in r.aiter_bytes():
                yield chunk

    async def copy_out_to(self, path: str, host_dir: str | os.PathLike[str]) -> list[str]:
        """A container file or directory unpacked into a directory of this machine, by the same
        containment as the library's (the archive is what a sandbox produced: hostile input);
        returns the symbolic links left out because they lead out of it."""
        return await unpack_to(self.copy_out(path), host_dir)

    # ---- engine-side work and lifecycle -----------------------------------------------------

    async def diff(self, path: str | None = None) -> WorkspaceDiff:
        """Files added, modified and deleted beneath ``path`` (default: the workdir) since the
        session started; within the workspace roots, secret files left out (as for a tenant)."""
        params = {} if path is None else {"path": path}
        return WorkspaceDiff.model_validate(await self._json("GET", "/diff", params=params))

    async def snapshot(self) -> str:
        """This session's files as a snapshot id; ``rt.session(from_snapshot=id)`` starts from it."""
        return str((await self._json("POST", "/snapshot"))["id"])

    async def fork(self, n: int) -> list[RemoteSession]:
        infos = await self._json("POST", "/fork", json={"n": n})
        return [await self._rt._attach(info) for info in infos]

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RemoteError):  # already gone (closed elsewhere, or expired)
            await self._rt.request("DELETE", self._base)


def _tar_of_path(path: Path) -> bytes:
    # Whole, not streamed: a request sent again to the replica that holds the session (421)
    # needs its body twice (a tar stream given by the caller can be sent only to the holder).
    with tempfile.TemporaryFile() as buf:
        write_tar(path, buf)
        buf.seek(0)
        return buf.read()
