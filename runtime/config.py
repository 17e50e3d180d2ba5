"""Configuration models for the runtime and for one session."""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The capabilities the root daemon needs: chown/mode keeping on writes, writing files the
# agent owns, dropping to the agent user, and signalling the agent's processes.
DAEMON_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]
# Under gVisor only, where there is no Landlock: the daemon mounts read-only views and
# chroots commands into them (sandbox/views.py). Capabilities of gVisor's own kernel, not
# the host's; commands never hold them.
GVISOR_DAEMON_CAPABILITIES = ["SYS_ADMIN", "SYS_CHROOT"]


def process_start_ticks(pid: int) -> str:
    """The kernel's start time of ``pid`` (empty if gone): tells a live owner from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def default_owner() -> str:
    """Who owns a container: host, pid and start time, so a reaper can tell a dead owner."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start_ticks(os.getpid())}"


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory: str = Field("2g", description="memory limit; swap is set equal, so no swap")
    # Half the host's cores (at least one): one busy session leaves the host responsive.
    cpus: float = Field(default_factory=lambda: max(1.0, (os.cpu_count() or 2) / 2), gt=0)
    pids: int = Field(512, gt=0)
    nofile: int = Field(4096, gt=0)
    fsize_bytes: int = Field(8 * 1024**3, gt=0, description="largest file a process may write")
    disk: str | None = Field(
        "10g", description="the container's writable layer (workspace, /tmp, installs); needs an XFS data-root"
    )


class SessionConfig(BaseModel):
    """How one session's container is made."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(None, description="image to run; default: the built caisson image")
    profile: str = "caisson"
    tenant: str = "default"
    ttl: float = Field(3600.0, gt=0, description="seconds before the reaper may remove the session")
    idle_timeout: float | None = Field(
        900.0, description="seconds without a call after which the session closes itself"
    )
    grace: float | None = Field(
        60.0, description="seconds a session outlives its controller (a re-attach within them keeps it); None: until TTL"
    )
    network: bool = Field(False, description="allow egress; default network none")
    gvisor: bool = Field(False, description="run under gVisor (runsc)")
    workdir: str = "/workspace"
    agent_user: str = "agent"
    env: dict[str, str] = Field(default_factory=dict)
    mounts: dict[str, str] = Field(
        default_factory=dict, description="host path -> container path; none unless named"
    )
    limits: Limits = Field(default_factory=Limits)
    call_timeout: float = Field(30.0, gt=0, description="deadline of a primitive call without its own timeout")
    max_frame: int = Field(32 * 1024 * 1024, gt=1024, description="largest reply frame accepted")
    stateless_bash: bool = Field(False, description="every bash call starts from the root dir and env")
    strict_quotas: bool = Field(
        False, description="refuse to start when the engine cannot enforce limits.disk (default: warn once)"
    )


class PoolConfig(BaseModel):
    """A warm pool: ``size`` started containers made as ``session`` says, taken by sessions whose
    container-shaping fields (image, limits, network, gvisor, workdir, user, env, mounts,
    timeouts) match; tenant, profile and policy bind when a session takes one."""

    model_config = ConfigDict(extra="forbid")

    size: int = Field(4, ge=1, description="containers kept started and idle")
    session: SessionConfig = Field(default_factory=SessionConfig)


class RuntimeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pool: PoolConfig | None = Field(None, description="keep started containers ready; none by default")

    docker_host: str | None = Field(None, description="default: DOCKER_HOST or the local socket")
    owner: str = Field(default_factory=default_owner)
    gc_on_start: bool = True
    state_dir: str = Field(
        default_factory=lambda: os.environ.get("CAISSON_STATE_DIR", os.path.expanduser("~/.caisson")),
        description="audit log and other host-side state",
    )
    start_timeout: float = Field(30.0, gt=0, description="seconds for a new container's daemon to answer")
    transport: Literal["auto", "attach"] = Field(
        "auto",
        description=(
            "auto: frames go over the daemon's unix socket where the host can reach it (a local engine, "
            "runc, a root controller), else over the attach stream; attach: always the attach stream"
        ),
    )
