"""caisson: a sandboxed execution runtime for AI agents (host controller).

The names in ``__all__`` are the public API; every module beneath is internal and may change.
Importing ``caisson`` is cheap: each name loads its module (and the engine's client, the
HTTP stack, the tools) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from caisson.config import Limits, PoolConfig, RuntimeConfig, SessionConfig
    from caisson.errors import (
        CaissonError,
        CallTimeout,
        DaemonDied,
        DaemonProtocolError,
        DockerUnavailable,
        HostLimit,
        ImageError,
        OpError,
        SessionError,
    )
    from caisson.policy.calls import ApprovalAnswer
    from caisson.policy.model import Policy
    from caisson.remote.client import RemoteError, RemoteRuntime, RemoteSession
    from caisson.runtime import Runtime
    from caisson.session import Session
    from caisson.session_protocol import SessionLike
    from caisson.tools.base import ToolResult

# Public name -> the module that defines it.
_HOMES = {
    "Runtime": "caisson.runtime",
    "Session": "caisson.session",
    "SessionLike": "caisson.session_protocol",
    "RuntimeConfig": "caisson.config",
    "SessionConfig": "caisson.config",
    "PoolConfig": "caisson.config",
    "Limits": "caisson.config",
    "Policy": "caisson.policy.model",
    "ApprovalAnswer": "caisson.policy.calls",
    "ToolResult": "caisson.tools.base",
    "RemoteRuntime": "caisson.remote.client",
    "RemoteSession": "caisson.remote.client",
    "RemoteError": "caisson.remote.client",
    "CaissonError": "caisson.errors",
    "CallTimeout": "caisson.errors",
    "DaemonDied": "caisson.errors",
    "DaemonProtocolError": "caisson.errors",
    "DockerUnavailable": "caisson.errors",
    "HostLimit": "caisson.errors",
    "ImageError": "caisson.errors",
    "OpError": "caisson.errors",
    "SessionError": "caisson.errors",
}

__all__ = [
    "ApprovalAnswer",
    "CaissonError",
    "CallTimeout",
    "DaemonDied",
    "DaemonProtocolError",
    "DockerUnavailable",
    "HostLimit",
    "ImageError",
    "Limits",
    "OpError",
    "Policy",
    "PoolConfig",
    "RemoteError",
    "RemoteRuntime",
    "RemoteSession",
    "Runtime",
    "RuntimeConfig",
    "Session",
    "SessionConfig",
    "SessionError",
    "SessionLike",
    "ToolResult",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'caisson' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    # Both session kinds satisfy the one protocol: mypy fails here when either drifts.
    def _conformance(local: Session, remote: RemoteSession) -> tuple[SessionLike, SessionLike]:
        return local, remote
