"""caisson: a sandboxed execution runtime for AI agents (host controller)."""

from caisson.config import Limits, RuntimeConfig, SessionConfig
from caisson.errors import (
    CaissonError,
    CallTimeout,
    DaemonDied,
    DaemonProtocolError,
    DockerUnavailable,
    ImageError,
    OpError,
    SessionError,
)
from caisson.remote import RemoteRuntime, RemoteSession
from caisson.runtime import Runtime
from caisson.session import Session

__all__ = [
    "CaissonError",
    "CallTimeout",
    "DaemonDied",
    "DaemonProtocolError",
    "DockerUnavailable",
    "ImageError",
    "Limits",
    "OpError",
    "RemoteRuntime",
    "RemoteSession",
    "Runtime",
    "RuntimeConfig",
    "Session",
    "SessionConfig",
    "SessionError",
]
