"""Request and response bodies of the hosted API: every byte that crosses the HTTP boundary
is validated into (or rendered from) one of these, and the OpenAPI document is made of them."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from caisson.audit import AuditEvent
from caisson.client.models import ExecResult, SpawnResult, TaskOutput, WriteResult
from caisson.server.paging import Page
from caisson.tools.base import ToolResult

__all__ = [
    "ApprovalAnswerBody",
    "ApprovalInfo",
    "ApprovalPage",
    "AuditEvent",
    "AuditPage",
    "CallBody",
    "CreatedKey",
    "ExecBody",
    "ExecResult",
    "ForkBody",
    "MkdirBody",
    "RangeReply",
    "RenameBody",
    "SignalBody",
    "Created",
    "Removed",
    "Written",
    "KeyBody",
    "KeyInfo",
    "KeyPage",
    "PROBLEM_TYPE",
    "Problem",
    "problem_body",
    "Quotas",
    "RequestPage",
    "RequestRecord",
    "SessionBody",
    "SessionInfo",
    "SessionLimits",
    "SessionPage",
    "SnapshotInfo",
    "SnapshotPage",
    "SpawnBody",
    "SpawnResult",
    "TaskOutput",
    "TenantBody",
    "TenantInfo",
    "TenantPage",
    "ToolResult",
    "WriteResult",
]

_Id = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")


class _Body(BaseModel):
    # Unknown fields are a client's mistake worth telling, not something to ignore.
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """Every error answer, an RFC 9457 problem (``application/problem+json``): what went wrong,
    in a sentence that says what to do, and ``error``, a stable code for programs."""

    type: str = "about:blank"
    title: str = ""
    status: int = 500
    detail: str
    error: str
    errors: list[dict[str, Any]] | None = Field(None, description="for 422: each invalid part of the request")


PROBLEM_TYPE = "application/problem+json"


def problem_body(status: int, error: str, detail: str, errors: list[dict[str, Any]] | None = None) -> bytes:
    """A problem document's bytes: ``title`` is the status's phrase (``type`` stays
    ``about:blank``, so the title is the status's own, as RFC 9457 asks)."""
    return Problem(title=HTTPStatus(status).phrase, status=status, detail=detail, error=error, errors=errors).model_dump_json(
        exclude_none=True
    ).encode()


class Quotas(_Body):
    max_sessions: int = Field(10, ge=0, le=10_000, description="sessions open at once")
    max_memory: str = Field("2g", pattern=r"^[0-9]+[bkmgBKMG]?$", description="largest memory limit of one session")
    max_disk: str = Field(
        "10g", pattern=r"^[0-9]+[bkmgBKMG]?$", description="largest disk limit of one session (its writable layer)"
    )
    calls_per_minute: int = Field(600, ge=0, le=1_000_000, description="session operations a minute, all sessions")
    snapshot_disk: str = Field(
        "20g", pattern=r"^[0-9]+[bkmgBKMG]?$", description="engine disk all of the tenant's snapshots (forks' too) may hold"
    )
    images: list[str] | None = Field(None, description="images a session may use; None: the default image only")
    profiles: list[str] | None = Field(None, description="profiles a session may use; None: any")
    gvisor: Literal["never", "allowed", "always"] = Field(
        "allowed", description="gVisor for a session: refused, on request, or for every session"
    )
    network: bool = Field(False, description="whether a session may ask for a network")
    egress: list[str] = Field(
        default_factory=list, max_length=256, description="egress entries (hosts, patterns, presets) a session may name"
    )
    start_env: list[str] = Field(
        default_factory=list, max_length=256,
        description="names a session's env may set although they change what its commands run or load (LD_PRELOAD, "
        "BASH_ENV, PATH with other directories, ...): the operator's explicit allowance; every other such name is refused",
    )


class TenantBody(_Body):
    name: str = _Id
    quotas: Quotas = Field(default_factory=Quotas)


class TenantInfo(BaseModel):
    id: str
    name: str
    quotas: Quotas
    created: float


class KeyBody(_Body):
    label: str = Field("", max_length=200)


class KeyInfo(BaseModel):
    id: str
    tenant_id: str | None
    scope: Literal["admin", "tenant"]
    label: str = ""
    created: float
    revoked: bool = False


class CreatedKey(KeyInfo):
    token: str = Field(description="shown once: only its SHA-256 is kept")


class SessionLimits(_Body):
    memory: str | None = Field(None, pattern=r"^[0-9]+[bkmgBKMG]?$")
    cpus: float | None = Field(None, gt=0, le=64)
    pids: int | None = Field(None, gt=0, le=100_000)
    disk: str | None = Field(
        None, pattern=r"^[0-9]+[bkmgBKMG]?$",
        description="the writable layer's size (workspace, /tmp, installs); the tenant's max_disk when not given",
    )


class SessionBody(_Body):
    image: str | None = Field(None, max_length=300)
    profile: str = Field("caisson", max_length=64)
    limits: SessionLimits = Field(default_factory=SessionLimits)
    ttl: float = Field(3600.0, gt=0, le=7 * 24 * 3600)
    idle_timeout: float | None = Field(900.0, gt=0, le=7 * 24 * 3600)
    env: dict[str, str] = Field(default_factory=dict, max_length=200)
    from_snapshot: str | None = Field(None, max_length=64, description="a snapshot id of this tenant")
    gvisor: bool = Field(False, description="run the session under gVisor (the tenant's quotas may force or refuse it)")
    network: bool = Field(False, description="give the session a network (if the tenant's quotas allow)")
    egress: list[str] = Field(
        default_factory=list, max_length=256, description="hosts the session may reach through caisson (within the quotas)"
    )


class SessionInfo(BaseModel):
    id: str
    tenant_id: str
    image: str | None
    profile: str
    memory: str
    state: Literal["open", "closed"]
    created: float
    closed: float | None = None
    closed_reason: str | None = Field(None, description="why it closed: on request, or how it ended by itself")


class CallBody(_Body):
    tool: str = Field(min_length=1, max_length=200)
    args: dict[str, Any] = Field(default_factory=dict)


class ExecBody(_Body):
    command: str | list[str] = Field(description="a bash command line, or an argv without a shell")
    timeout: float | None = Field(60.0, gt=0, le=24 * 3600)
    cwd: str | None = Field(None, max_length=4096)
    env: dict[str, str] = Field(default_factory=dict, max_length=200)
    stdin: str | None = None


class SpawnBody(_Body):
    command: str | list[str]
    timeout: float | None = Field(None, gt=0, le=7 * 24 * 3600)
    cwd: str | None = Field(None, max_length=4096)
    env: dict[str, str] = Field(default_factory=dict, max_length=200)
    name: str | None = Field(None, max_length=200)
    stdin: str | None = Field(None, description="written to the task's stdin at its start")


_Path = Field(min_length=1, max_length=4096, description="a container path; relative to the workdir")


class MkdirBody(_Body):
    path: str = _Path
    parents: bool = True
    exist_ok: bool = True


class GrepBody(_Body):
    """SandboxClient.grep's arguments: a content search below ``root``."""

    root: str = _Path
    pattern: str = Field(min_length=1, max_length=4096)
    paths: list[str] | None = Field(None, max_length=10_000)
    engine: Literal["auto", "rg", "python"] = "auto"
    mode: Literal["content", "files", "count"] = "content"
    fixed_strings: bool = False
    ignore_case: bool = False
    multiline: bool = False
    globs: list[str] = Field(default_factory=list, max_length=256)
    type_globs: list[str] = Field(default_factory=list, max_length=256)
    hidden: bool = False
    no_ignore: bool = False
    max_total: int = Field(1000, ge=1, le=100_000)
    max_per_file: int | None = Field(None, ge=1, le=100_000)
    max_line_chars: int = Field(2000, ge=1, le=100_000)
    before: int = Field(0, ge=0, le=1000)
    after: int = Field(0, ge=0, le=1000)
    timeout: float | None = Field(None, gt=0, le=3600)


class FindBody(_Body):
    """SandboxClient.find's arguments: files below ``root`` whose relative path matches ``regex``."""

    root: str = _Path
    regex: str = Field(min_length=1, max_length=4096)
    globs: list[str] = Field(default_factory=list, max_length=256)
    type_globs: list[str] = Field(default_factory=list, max_length=256)
    hidden: bool = False
    no_ignore: bool = False
    sort: Literal["modified", "path"] = "modified"
    offset: int = Field(0, ge=0)
    limit: int = Field(1000, ge=1, le=100_000)
    timeout: float | None = Field(None, gt=0, le=3600)


class RenameBody(_Body):
    src: str = _Path
    dst: str = _Path
    overwrite: bool = True


class SignalBody(_Body):
    signal: str | int = Field("KILL", description="a name (TERM, INT, KILL, ...) or a number")
    tree: bool = Field(True, description="the task's whole process tree, not its leader alone")


class RangeReply(BaseModel):
    """One byte range of a file: its bytes (base64), the file's size and optional sha256."""

    data: str = Field(description="the bytes, base64")
    size: int
    offset: int
    eof: bool
    sha256: str | None = None


class Created(BaseModel):
    created: bool = Field(description="false: the directory was there already")


class Removed(BaseModel):
    removed: bool = Field(description="false: there was nothing to remove (missing_ok)")


class Written(BaseModel):
    written: int = Field(description="bytes the task's stdin took")


class SnapshotInfo(BaseModel):
    id: str
    tenant_id: str
    session_id: str
    created: float


class ForkBody(_Body):
    n: int = Field(1, ge=1, le=16)


class ApprovalAnswerBody(_Body):
    decision: Literal["allow_once", "allow_session", "deny"]
    message: str | None = Field(None, max_length=2000)


class ApprovalInfo(BaseModel):
    id: str
    tenant_id: str
    session_id: str
    call_id: str
    tool: str
    level: str
    command: str | None = None
    paths: list[str] = []
    preview: str = ""
    reasons: list[str] = []
    state: Literal["pending", "allow_once", "allow_session", "deny", "expired"]
    message: str | None = None
    approver: str | None = None
    created: float
    answered: float | None = None


class RequestRecord(BaseModel):
    """One API request as the request log keeps it."""

    time: float
    tenant_id: str | None
    key_id: str | None
    method: str
    path: str
    status: int
    note: str = ""


# The pages of the lists, named so that the OpenAPI document (and a generated client) reads well.
class AuditPage(Page[AuditEvent]):
    """A page of audit events."""


class SessionPage(Page[SessionInfo]):
    """A page of sessions."""


class SnapshotPage(Page[SnapshotInfo]):
    """A page of snapshots."""


class ApprovalPage(Page[ApprovalInfo]):
    """A page of approvals."""


class RequestPage(Page[RequestRecord]):
    """A page of the request log."""


class TenantPage(Page[TenantInfo]):
    """A page of tenants."""


class KeyPage(Page[KeyInfo]):
    """A page of API keys."""
