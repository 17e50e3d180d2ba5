"""What the policy decides about, and what it answers: a call, its decision, an approval
request to the embedding program and its answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .grants import Grant
from .levels import GrantLevel, Level
from .model import Access

Outcome = Literal["allow", "warn", "approved", "denied"]

ACCESS_GRANT_LEVEL: dict[str, GrantLevel] = {
    "read": GrantLevel.READ,
    "write": GrantLevel.WRITE,
    "execute": GrantLevel.EXECUTE,
    "delete": GrantLevel.ADMIN,
    "network": GrantLevel.READ,
    "none": GrantLevel.READ,
}


class ResolvedPath(BaseModel):
    """A path as the agent asked for it and as resolved inside the container (realpath,
    symlinks followed), both computed by the caller."""

    model_config = ConfigDict(frozen=True)

    requested: str
    resolved: str
    # Names of the file (hard links): another name may be a secret's.
    links: int = 1
    # The path is a symbolic link: the link's own real path (ops on the link itself reach it).
    entry: str | None = None


def domain_allowed(host: str, allowed: list[str]) -> bool:
    """Whether ``host`` is one of ``allowed`` or beneath one ("*.example.com" = "example.com")."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        domain = entry.lower().strip().rstrip(".").removeprefix("*.")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


class CallRequest(BaseModel):
    """One tool call, as the policy sees it."""

    model_config = ConfigDict(frozen=True)

    tenant: str = "default"
    session_id: str
    call_id: str
    tool: str
    tool_alias: str | None = None
    # Declared level of the tool (policy.tool_levels wins); None counts as dangerous.
    level: Level | None = None
    # The declared level is a floor (the profile's specification states it): a command's
    # classification may raise the call's level above it, never lower it.
    level_is_floor: bool = False
    args: dict[str, Any] = {}
    paths: list[ResolvedPath] = []
    # Set for calls whose command line is classified (bash); its level replaces the declared one.
    command: str | None = None
    # The directory the command runs in (the call's own, else the shell's), to place relative paths.
    cwd: str | None = None
    # The environment the call gives its command (bash/exec/run_code ``env``): decided with it.
    env: dict[str, str] = {}
    # Host a network call (web_fetch) sends its request to, and whether the URL has a query.
    domain: str | None = None
    query: bool = False
    access: Access = "read"
    # A write that reads its paths' contents first (an edit): secrets and hard links count as for a read.
    reads: bool = False
    # Whether the kernel will confine the command to the level decided (Landlock). Without
    # it, the classifier's guess would be the only wall, so every command counts as dangerous.
    kernel_confines: bool = True


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    outcome: Outcome
    level: Level
    rule: str | None = None
    approver: str | None = None
    message: str = ""
    reasons: list[str] = []
    destructive: str | None = None
    # For a command: the part of it that set its level.
    decisive: str | None = None
    # Session grants created by this decision (an "allow for the session" answer).
    grants: list[Grant] = []


class ApprovalRequest(BaseModel):
    """What the embedding program is asked to approve."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["call", "permission"] = "call"
    tenant: str
    session_id: str
    call_id: str
    tool: str
    tool_alias: str | None = None
    level: Level
    rule: str | None = None
    reasons: list[str] = []
    command: str | None = None
    # The environment the command would get, as the call gives it (secret-looking values masked).
    env: dict[str, str] = {}
    paths: list[str] = []
    domain: str | None = None
    access: Access | None = None
    preview: str = ""
    # The grants an "allow_session" answer creates unless the answer names its own.
    suggested_grants: list[Grant] = []
    # For ask_for_permissions: the agent's description and reason.
    description: str | None = None
    reason: str | None = None


class ApprovalAnswer(BaseModel):
    model_config = ConfigDict(frozen=True)

    decision: Literal["allow_once", "allow_session", "deny"]
    message: str | None = None
    approver: str | None = None
    # Scope of an allow_session answer; None means the request's suggested grants.
    grants: list[Grant] | None = None

    @classmethod
    def allow_once(cls, approver: str | None = None) -> ApprovalAnswer:
        return cls(decision="allow_once", approver=approver)

    @classmethod
    def allow_session(cls, approver: str | None = None, grants: list[Grant] | None = None) -> ApprovalAnswer:
        return cls(decision="allow_session", approver=approver, grants=grants)

    @classmethod
    def deny(cls, message: str | None = None, approver: str | None = None) -> ApprovalAnswer:
        return cls(decision="deny", message=message, approver=approver)


ApprovalHandler = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]


class PermissionAnswer(BaseModel):
    """Result of :meth:`PolicyEngine.request_permission` (the ask_for_permissions tool)."""

    model_config = ConfigDict(frozen=True)

    granted: bool
    scope: Literal["once", "session"] | None = None
    message: str | None = None
    grant: Grant | None = None
