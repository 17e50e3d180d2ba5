"""`caisson doctor`: what this host can give sessions, and what to do about what it cannot.

Each check prints one line: ``ok``, ``warn`` (sessions work, with less protection) or
``fail`` (sessions cannot start), and for anything not ok, what to run or change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from caisson.backend import EngineFacts
from caisson.config import RuntimeConfig, SessionConfig
from caisson.errors import CaissonError
from caisson.runtime import Runtime
from caisson.transport.unix import UnixStream

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return text + (f"\n      fix: {self.fix}" if self.fix and self.status != "ok" else "")


def _engine(facts: EngineFacts) -> tuple[Check, Check, Check]:
    engine = Check("engine", "ok", f"{facts.engine} {facts.version or '?'} at {facts.address}, {facts.storage_driver} storage")
    gvisor = (
        Check("gvisor", "ok", "runsc is registered: gvisor=True sessions work")
        if "runsc" in facts.runtimes
        else Check("gvisor", "warn", "no runsc runtime: gvisor=True sessions fail",
                   "install Debian's runsc and register it with the engine (scripts/setup.sh of a checkout does both)")
    )
    quota = (
        Check("disk quota", "ok", f"{facts.storage_driver} with {facts.disk_quota}: limits.disk is a hard limit, "
              "enforced by the kernel (inodes too)")
        if facts.disk_quota
        else Check("disk quota", "warn", f"{facts.storage_driver}: no hard per-session disk limit; the controller "
                   "ends a session over limits.disk about a second after it goes over (a soft bound a fast writer outruns)",
                   "give dockerd a btrfs data-root with quotas (--storage-driver btrfs) or XFS mounted with pquota; "
                   "scripts/setup.sh of a checkout does, for its own dockerd")
    )
    return engine, gvisor, quota


async def run_doctor() -> list[Check]:
    checks: list[Check] = []
    try:
        async with Runtime(RuntimeConfig(gc_on_start=False)) as rt:
            facts = await rt.backend.facts()
    except CaissonError as exc:
        return [Check("engine", "fail", str(exc),
                      "start a Docker engine (dockerd) or set DOCKER_HOST; from a checkout, scripts/setup.sh sets one up")]
    checks.extend(_engine(facts))
    checks.append(
        Check("image", "ok", f"{facts.default_image} is built")
        if facts.default_image_present
        else Check("image", "fail", f"{facts.default_image} is missing", "caisson image build")
    )
    if facts.default_image_present:
        checks.extend(await _in_a_session())
        if any(c.name == "gvisor" and c.status == "ok" for c in checks):
            gvisor = await _gvisor_levels(facts)
            checks = [gvisor if c.name == "gvisor" else c for c in checks]
    return checks


async def _gvisor_levels(facts: EngineFacts) -> Check:
    """What enforces the permission levels in a gVisor session (it has no Landlock), and
    whether it can have a network."""
    try:
        async with Runtime(RuntimeConfig(gc_on_start=False)) as rt, rt.session(
            SessionConfig(idle_timeout=60, gvisor=True)
        ) as s:
            info = await s.ping()
    except CaissonError as exc:
        return Check("gvisor", "fail", f"runsc is registered but a gVisor session did not start: {exc}",
                     "see `docker info` and runsc's logs; gVisor here needs runsc's --network=none")
    network = (
        "; no network (runsc runs with --network=none): network=True is refused, egress allowlists work"
        if facts.gvisor_without_network
        else ""
    )
    if info.levels == "views":
        return Check("gvisor", "ok", "gvisor=True sessions work; levels enforced by read-only views and chroot "
                     f"(no Landlock in gVisor), metadata at safe and internet sockets without network by seccomp{network}")
    return Check("gvisor", "warn", "gvisor=True sessions work, but nothing enforces the levels there: "
                 "every bash call counts as dangerous", "the daemon needs CAP_SYS_ADMIN and CAP_SYS_CHROOT in gVisor "
                 "to make its read-only views; check the container's capabilities")


async def _in_a_session() -> list[Check]:
    """What only a started session shows: Landlock inside containers, which way frames go,
    and how commands start."""
    try:
        async with Runtime(RuntimeConfig(gc_on_start=False)) as rt, rt.session(SessionConfig(idle_timeout=60)) as s:
            info = await s.ping()
            abi = info.landlock
            fast = isinstance(s.channel.transport, UnixStream)
    except CaissonError as exc:
        return [Check("landlock", "fail", f"could not start a session to ask: {exc}", "see the checks above")]
    landlock = (
        Check("landlock", "ok", f"ABI {abi} in containers: commands are confined to the level approved "
              "(metadata at safe by seccomp)")
        if abi > 0
        else Check("landlock", "warn", "no Landlock in containers: every bash call counts as dangerous",
                   "use a kernel with Landlock (5.13 or later, enabled in the LSM list)")
    )
    transport = (
        Check("transport", "ok", "frames go over the daemon's unix socket (the local fast path)")
        if fast
        else Check("transport", "warn", "frames go over the attach stream: each call costs about 0.3 ms more",
                   "run the controller as root beside a local engine (it reaches the socket through /proc)")
    )
    spawn = (
        Check("spawn", "ok", "commands start through clone-exec, the daemon's native clone helper")
        if info.clone_exec
        else Check("spawn", "warn", "commands start from clones set up in Python: each costs about 0.5 ms more",
                   "install a C compiler and static C library (Debian: gcc libc6-dev), then `caisson image build`")
    )
    return [landlock, transport, spawn]


def report(checks: list[Check]) -> tuple[str, int]:
    """The lines to print and the exit code (1 when anything failed)."""
    return "\n".join(c.line() for c in checks), int(any(c.status == "fail" for c in checks))
