"""caisson: a sandboxed execution runtime for AI agents (host controller)."""

from runtime.config import Limits, RuntimeConfig, SessionConfig
from runtime.errors import (
    CaissonError,
    CallTimeout,
    DaemonDied,
    DaemonProtocolError,
    DockerUnavailable,
    ImageError,
    OpError,
    SessionError,
)
from runtime.remote import RemoteRuntime, RemoteSession
from runtime.runtime import Runtime
from runtime.session import Session

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
