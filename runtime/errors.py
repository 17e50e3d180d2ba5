"""Errors a caisson user can act on. Each message says what happened and what to do."""

from __future__ import annotations


class CaissonError(Exception):
    """Base of every error caisson raises on purpose."""

    code = "error"


class DockerUnavailable(CaissonError):
    code = "docker_unavailable"


class ImageError(CaissonError):
    code = "image_error"


class SessionError(CaissonError):
    """The session cannot be used (closed, expired, container gone)."""

    code = "session_error"


class HostLimit(CaissonError):
    """Opening the session would let the host's sessions together pass a limit of the host's."""

    code = "host_limit"


class DaemonDied(SessionError):
    """The daemon's stream ended: the agent killed it, or the container stopped."""

    code = "daemon_died"


class DaemonProtocolError(SessionError):
    """The daemon sent something that is not a valid reply (too large, garbage, wrong shape)."""

    code = "daemon_protocol_error"


class CallTimeout(CaissonError):
    code = "timeout"


class OpError(CaissonError):
    """The daemon refused or failed an operation (file missing, conflict, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
