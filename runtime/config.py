"""Configuration models for the runtime and for one session."""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


def owner_alive(owner: str) -> bool:
    """Owners on other hosts are presumed alive: only their TTL can condemn them here."""
    host, _, rest = owner.partition(":")
    pid, _, ticks = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return process_start_ticks(int(pid)) == ticks and ticks != ""



def default_owner() -> str:
    """Who owns a container: host, pid and start time, so a reaper can tell a dead owner."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start_ticks(os.getpid())}"


def parse_bytes(size: str) -> int:
    """``"300m"``, ``"2g"``, ``"512k"`` or a plain number of bytes."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    size = size.strip().lower().rstrip("b")
    if size and size[-1] in units:
        return int(float(size[:-1]) * units[size[-1]])
    return int(size)

class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory: str = Field("2g", description="memory limit; swap is set equal, so no swap")
    # Half the host's cores (at least one): one busy session leaves the host responsive.
    cpus: float = Field(default_factory=lambda: max(1.0, (os.cpu_count() or 2) / 2), gt=0)
    pids: int = Field(512, gt=0)
    nofile: int = Field(4096, gt=0)
    fsize_bytes: int = Field(8 * 1024**3, gt=0, description="largest file a process may write")
    disk: str | None = Field(
        "10g", description="the container's writable layer (workspace, /tmp, installs); a hard limit on a btrfs or XFS-pquota engine"
    )


# Where the daemon's egress relay listens on the container's loopback (its own network
# namespace: the number is free in every session).
EGRESS_PORT = 3128


class EgressLimits(BaseModel):
    """Bounds of one session's egress, enforced on the host."""

    model_config = ConfigDict(extra="forbid")

    max_connections: int = Field(32, ge=1, le=4096, description="connections open at once")
    max_bytes_out: int = Field(
        256 * 1024**2, ge=0, description="bytes the session may send out over its lifetime, all connections"
    )
    idle_seconds: float = Field(300.0, gt=0, description="a connection with no byte either way for this long is cut")


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
    network: bool = Field(False, description="Docker's bridge network; default network none")
    egress: list[str] = Field(
        default_factory=list,
        max_length=256,
        description=(
            "hosts the session's programs may reach through caisson's proxy: names (pypi.org), "
            "subdomain patterns (*.pythonhosted.org), optional :port (default 80 and 443) and presets "
            "(python, node, github, debian); others ask the approval handler; empty: no egress"
        ),
    )
    egress_limits: EgressLimits = Field(default_factory=EgressLimits)
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


    @property
    def egress_port(self) -> int:
        """The loopback port of the session's egress relay (0: the session has no egress)."""
        return EGRESS_PORT if self.egress else 0

    def proxy_env(self) -> dict[str, str]:
        """What points the usual tools (curl, pip, git, npm, yarn, apt) at the egress relay."""
        if not self.egress:
            return {}
        url = f"http://127.0.0.1:{EGRESS_PORT}"
        local = "localhost,127.0.0.1,::1"
        env = {name: url for name in ("http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy")}
        env |= {"no_proxy": local, "YARN_HTTP_PROXY": url, "YARN_HTTPS_PROXY": url}
        return env | {k.upper(): v for k, v in env.items() if k.islower()}


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

    @field_validator("pool", mode="before")
    @classmethod
    def _pool_size(cls, value: object) -> object:
        """``pool=4`` means ``PoolConfig(size=4)`` (default sessions); ``pool=0``, no pool."""
        if isinstance(value, int) and not isinstance(value, bool):
            return PoolConfig(size=value) if value else None
        return value

    docker_host: str | None = Field(None, description="default: DOCKER_HOST or the local socket")
    owner: str = Field(default_factory=default_owner)
    gc_on_start: bool = True
    state_dir: str = Field(
        default_factory=lambda: os.environ.get("CAISSON_STATE_DIR", os.path.expanduser("~/.caisson")),
        description="audit log and other host-side state",
    )
    start_timeout: float = Field(30.0, gt=0, description="seconds for a new container's daemon to answer")
    soft_disk_watch: bool = Field(
        False,
        description=(
            "bound limits.disk with the host's soft watch even where the engine has a hard limit (to test and "
            "measure the watch); sessions with strict_quotas are then refused"
        ),
    )
    gvisor_host_threads_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description=(
            "share of the host's kernel.pid_max (or threads-max, the smaller) that the gVisor sessions of a local "
            "engine may hold as host threads together (16 × limits.pids each, at least 2,048); a gVisor session past it is refused. "
            "Not checked on a remote engine, whose kernel this host cannot read"
        ),
    )
    egress_hosts: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "host name -> address for sessions' egress, like `docker run --add-host`: used instead of DNS, "
            "and an address named here is reachable even when private or loopback"
        ),
    )
    @field_validator("egress_hosts")
    @classmethod
    def _addresses(cls, value: dict[str, str]) -> dict[str, str]:
        for name, address in value.items():
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise ValueError(f"egress_hosts[{name!r}] = {address!r} is not an IP address") from None
        return {name.lower().rstrip("."): address for name, address in value.items()}

    transport: Literal["auto", "attach"] = Field(
        "auto",
        description=(
            "auto: frames go over the daemon's unix socket where the host can reach it (a local engine, "
            "runc, a root controller), else over the attach stream; attach: always the attach stream"
        ),
    )
