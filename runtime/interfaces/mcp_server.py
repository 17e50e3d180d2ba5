"""`caisson mcp`: a Model Context Protocol server over stdio that serves one session's tools.

Transport (MCP stdio): JSON-RPC 2.0, one UTF-8 JSON message per line on stdin and stdout;
logs go to stderr. The session's container starts at ``notifications/initialized`` or the
first ``tools/call``, so ``initialize`` answers at once. Requests run concurrently; EOF on
stdin lets the requests in flight finish, removes the container and returns.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any, BinaryIO, Literal

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel, StrictInt, StrictStr, ValidationError

from runtime.config import SessionConfig
from runtime.errors import CaissonError
from runtime.logs import get_logger
from runtime.policy import Level, Policy
from runtime.profiles import get_profile
from runtime.profiles.base import Profile
from runtime.profiles.export import export_tools, prompt_text
from runtime.runtime import Runtime
from runtime.session import Session

log = get_logger("caisson.mcp")

PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_VERSIONS = frozenset({"2025-06-18", "2025-03-26", "2024-11-05"})
# The first revision with structuredContent in tool results.
STRUCTURED_CONTENT_SINCE = "2025-06-18"
# How long a daemon may take to answer the liveness probe before its session counts as dead.
_PROBE_TIMEOUT = 5.0

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = StrictInt | StrictStr


class Request(BaseModel):
    jsonrpc: Literal["2.0"]
    id: RequestId
    method: str
    params: dict[str, Any] | None = None


class Notification(BaseModel):
    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] | None = None


class InitializeParams(BaseModel):
    protocolVersion: str
    capabilities: dict[str, Any] = {}
    clientInfo: dict[str, Any] | None = None


class CallToolParams(BaseModel):
    name: str
    arguments: dict[str, Any] | None = None


class CancelledParams(BaseModel):
    requestId: RequestId
    reason: str | None = None


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _where(exc: ValidationError) -> str:
    """One line naming each bad field, e.g. `method: Field required`."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(message)'}: {e['msg']}" for e in exc.errors()[:5])


def _invalid_params(exc: ValidationError) -> RpcError:
    return RpcError(INVALID_PARAMS, f"invalid params: {_where(exc)}")


def _error(id_: RequestId | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _version() -> str:
    try:
        return metadata.version("caisson-runtime")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def load_policy(policy_file: str | None, approve_all: bool) -> Policy:
    try:
        policy = Policy.from_env(Policy.load(policy_file) if policy_file else None)
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise CaissonError(f"cannot load the policy {policy_file or '(from the environment)'}: {exc}") from None
    return policy.model_copy(update={"auto_approve": Level.DANGEROUS}) if approve_all else policy


class LineWriter:
    """Writes whole messages, one per line, in the order their writers took the lock."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = anyio.Lock()

    def _write(self, data: bytes) -> None:
        self._stream.write(data)
        self._stream.flush()

    async def send(self, message: dict[str, Any]) -> None:
        # json.dumps escapes newlines inside strings, so a message is always one line.
        data = json.dumps(message, default=str).encode() + b"\n"
        async with self._lock:
            try:
                await anyio.to_thread.run_sync(self._write, data)
            except OSError as exc:
                log.warning("cannot write to the client", error=str(exc))


class McpServer:
    def __init__(
        self,
        rt: Runtime,
        profile: Profile,
        policy: Policy,
        config: SessionConfig,
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self._rt = rt
        self._profile = profile
        self._policy = policy
        self._config = config.model_copy(update={"profile": profile.name})
        self._send = send
        self._tools = export_tools(profile, "mcp")
        self._protocol = PROTOCOL_VERSION
        self._session: Session | None = None
        self._session_lock = anyio.Lock()
        self._in_flight: dict[RequestId, anyio.CancelScope] = {}
        self._methods: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }

    async def run(self, lines: MemoryObjectReceiveStream[bytes]) -> None:
        """Serve until ``lines`` ends; requests still in flight then finish first."""
        async with anyio.create_task_group() as tg, lines:
            async for line in lines:
                if line.strip():
                    await self._accept(line, tg)

    async def _accept(self, line: bytes, tg: anyio.abc.TaskGroup) -> None:
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            await self._send(_error(None, PARSE_ERROR, f"parse error: {exc}"))
            return
        if isinstance(raw, dict) and "method" not in raw and ("result" in raw or "error" in raw):
            # A response: this server sends no requests, so there is nothing waiting for it.
            log.debug("ignored a response from the client", id=raw.get("id"))
            return
        if not isinstance(raw, dict):
            await self._send(_error(None, INVALID_REQUEST, "invalid request: expected one JSON object (no batches)"))
            return
        try:
            if "id" in raw:
                tg.start_soon(self._handle_request, Request.model_validate(raw))
            else:
                self._handle_notification(Notification.model_validate(raw), tg)
        except ValidationError as exc:
            id_ = raw.get("id")
            reply_id = id_ if isinstance(id_, int | str) and not isinstance(id_, bool) else None
            await self._send(_error(reply_id, INVALID_REQUEST, f"invalid request: {_where(exc)}"))

    def _handle_notification(self, note: Notification, tg: anyio.abc.TaskGroup) -> None:
        if note.method == "notifications/initialized":
            tg.start_soon(self._warm_up)
        elif note.method == "notifications/cancelled":
            try:
                params = CancelledParams.model_validate(note.params or {})
            except ValidationError:
                return
            scope = self._in_flight.get(params.requestId)
            if scope is not None:
                log.debug("request cancelled", id=params.requestId, reason=params.reason)
                scope.cancel()
        else:
            log.debug("ignored a notification", method=note.method)

    async def _handle_request(self, request: Request) -> None:
        scope = anyio.CancelScope()
        self._in_flight[request.id] = scope
        try:
            # A cancelled request gets no reply (the MCP cancellation rule).
            with scope:
                await self._send(await self._reply(request))
        finally:
            self._in_flight.pop(request.id, None)

    async def _reply(self, request: Request) -> dict[str, Any]:
        method = self._methods.get(request.method)
        if method is None:
            return _error(request.id, METHOD_NOT_FOUND, f"method not found: {request.method}")
        try:
            result = await method(request.params or {})
        except RpcError as exc:
            return _error(request.id, exc.code, exc.message)
        except CaissonError as exc:
            return _error(request.id, INTERNAL_ERROR, str(exc))
        except Exception as exc:
            log.exception("request failed", method=request.method)
            return _error(request.id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")
        return {"jsonrpc": "2.0", "id": request.id, "result": result}

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            init = InitializeParams.model_validate(params)
        except ValidationError as exc:
            raise _invalid_params(exc) from None
        # Version negotiation: echo a version we speak, otherwise offer our latest.
        self._protocol = init.protocolVersion if init.protocolVersion in SUPPORTED_VERSIONS else PROTOCOL_VERSION
        log.info("client initialized", client=init.clientInfo, protocol=self._protocol)
        return {
            "protocolVersion": self._protocol,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "caisson", "version": _version()},
            "instructions": prompt_text(self._profile),
        }

    async def _ping(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _list_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": self._tools}

    async def _call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            call = CallToolParams.model_validate(params)
        except ValidationError as exc:
            raise _invalid_params(exc) from None
        if self._profile.lookup(call.name) is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {call.name}")
        session, notice = await self._current_session()
        result = await session.call(call.name, call.arguments or {})
        text = f"{notice}\n\n{result.text}" if notice else result.text
        reply: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": not result.ok}
        if isinstance(result.data, dict) and self._protocol >= STRUCTURED_CONTENT_SINCE:
            reply["structuredContent"] = result.data
        return reply

    async def _current_session(self) -> tuple[Session, str | None]:
        """The live session, started on first use; a dead one (TTL, idle timeout, killed) is
        replaced, and the notice tells the agent its workspace is fresh."""
        async with self._session_lock:
            notice = None
            if self._session is not None and not await _responds(self._session):
                failure = self._session.channel.failure
                notice = f"[caisson: the previous sandbox session ended ({failure}); this call ran in a new session with a fresh workspace]"
                log.warning("session ended; starting a new one", session=self._session.id, error=str(failure))
                await self._session.close()
                self._session = None
            if self._session is None:
                self._session = await self._rt.open_session(self._config, policy=self._policy)
                log.info("session started", session=self._session.id, profile=self._profile.name)
            return self._session, notice

    async def _warm_up(self) -> None:
        try:
            await self._current_session()
        except CaissonError as exc:
            # The first tools/call tries again and reports the error to the client.
            log.warning("could not start the session", error=str(exc))


async def _responds(session: Session) -> bool:
    """Whether the session's daemon still answers: nothing reads the channel between calls,
    so a container that died (TTL, idle timeout, killed) shows only when asked."""
    if session.closed:
        return False
    try:
        await session.ping(timeout=_PROBE_TIMEOUT)
    except CaissonError:
        return False
    return True


def _pump(fd: int, send: MemoryObjectSendStream[bytes], portal: BlockingPortal) -> None:
    """Feed the lines read from ``fd`` to the event loop; end the stream at EOF.

    Raw ``os.read``, not ``sys.stdin``: a daemon thread blocked inside a buffered reader's
    lock aborts the interpreter at exit."""
    pending: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError as exc:
                log.warning("cannot read from the client", error=str(exc))
                chunk = b""
            if not chunk:
                break
            *complete, rest = chunk.split(b"\n")
            for piece in complete:
                portal.call(send.send, b"".join((*pending, piece)))
                pending.clear()
            pending.append(rest)
        if any(pending):
            portal.call(send.send, b"".join(pending))  # a last line without its newline
        portal.call(send.aclose)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
        return  # the server stopped first (a signal); nobody is reading any more


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("stopping", signal=signal.Signals(signum).name)
            scope.cancel()
            return


async def serve_stdio(*, profile: str, policy_file: str | None, approve_all: bool, config: SessionConfig) -> None:
    """Run the server on this process's stdin and stdout until EOF or SIGTERM/SIGINT/SIGHUP."""
    prof = get_profile(profile)
    policy = load_policy(policy_file, approve_all)
    # Only protocol messages may reach stdout: keep a private copy of it for them and point
    # fd 1 at stderr, so a stray print (ours, a library's, a child's) cannot corrupt the stream.
    sys.stdout.flush()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    writer = LineWriter(out)
    try:
        async with Runtime() as rt, BlockingPortal() as portal, anyio.create_task_group() as tg:
            send, lines = anyio.create_memory_object_stream[bytes](0)
            tg.start_soon(_stop_on_signal, tg.cancel_scope)
            # A daemon thread, not an anyio worker: a read blocked on an open stdin must not
            # keep the process alive after a signal.
            threading.Thread(
                target=_pump, args=(sys.stdin.fileno(), send, portal), name="caisson-mcp-stdin", daemon=True
            ).start()
            await McpServer(rt, prof, policy, config, writer.send).run(lines)
            tg.cancel_scope.cancel()
        # Leaving the Runtime closed the session and removed its container.
    finally:
        out.close()
