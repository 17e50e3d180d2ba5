"""Container lifecycle on a Docker engine: create hardened, inject the daemon, start, remove.

docker-py is blocking; callers run these functions in worker threads. The hot path
(every tool call) does not come through here: it uses the attach stream (attach.py).
"""

from __future__ import annotations

import io
import itertools
import math
import os
import posixpath
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import requests

from caisson.config import DAEMON_CAPABILITIES, GVISOR_DAEMON_CAPABILITIES, SessionConfig, parse_bytes
from caisson.docker.images import DAEMON_PARENT, daemon_tar, image_carries_daemon, image_tag
from caisson.errors import DockerUnavailable, ImageError, SessionError
from caisson.logs import get_logger
from caisson.transport import container_root

log = get_logger("caisson.containers")

# Renewed by the controller while it lives; the daemon ends the session a grace after.
LEASE_PATH = f"{DAEMON_PARENT}/lease"

LABEL_SESSION = "caisson.session"
LABEL_OWNER = "caisson.owner"
LABEL_TENANT = "caisson.tenant"
LABEL_EXPIRES = "caisson.expires"
LABEL_PROFILE = "caisson.profile"
# Set when the daemon listens on its unix socket as well as on stdin.
LABEL_LISTEN = "caisson.listen"
# Set when the daemon ends the session a grace after its controller: the reaper leaves it be.
LABEL_GRACE = "caisson.grace"
# On a gVisor session: the host threads it may hold (docker/host_threads.py adds them up).
LABEL_HOST_THREADS = "caisson.host_threads"


NUM_POOLS = 256
# Above anyio's default of 40 worker threads, which make the engine calls, and our own few.
MAX_POOL_SIZE = 64


def docker_host_url() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def connect(docker_host: str | None = None) -> docker.DockerClient:
    url = docker_host or docker_host_url()
    try:
        # docker-py keeps one connection pool per request URL (container ids are in URLs) and
        # closes the least recently used beyond num_pools, even while a thread is using it: with
        # its default of 25, many sessions at once made requests fail. Room for a few hundred.
        # A pool holds at most max_pool_size connections: more requests at once to one URL
        # (50 sessions created at once) overflow it, and urllib3's handling of an overflowing
        # pool that was closed meanwhile fails the request. Room for every engine thread.
        client = docker.DockerClient(
            base_url=url, version="auto", timeout=60, num_pools=NUM_POOLS, max_pool_size=MAX_POOL_SIZE
        )
        client.ping()
        return client
    except (docker.errors.DockerException, OSError) as exc:
        raise DockerUnavailable(
            f"Docker is not reachable at {url}: start it with `sudo systemctl start docker` or `sudo dockerd &` "
            f"(install it first if missing: `sudo apt-get install docker.io`, or your system's Docker package), "
            f"or set DOCKER_HOST to a reachable engine; in a checkout of caisson, `scripts/setup.sh` does all of "
            f"it. `caisson doctor` checks the result. ({exc})"
        ) from None


@contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """The engine gone or wedged past the client's timeout, as an error that says so."""
    try:
        yield
    except docker.errors.APIError:
        raise  # the engine answered: callers turn these into their own errors
    except (requests.exceptions.RequestException, OSError) as exc:
        raise DockerUnavailable(f"Docker stopped answering while {what}: {exc}") from None


@dataclass(frozen=True)
class CreatedContainer:
    id: str
    session_id: str
    image: str
    injected: bool
    # The daemon's host pid when its socket can be reached (see reachable_pid), else 0.
    pid: int = 0


# What bounds a container's disk on each engine (by address): "xfs-pquota", "btrfs-squota"
# (simple quotas: each extent counts against the subvolume that wrote it), "btrfs-qgroup"
# (full accounting: the image's shared extents count too), or None (only the soft watch).
_QUOTAS: dict[str, str | None] = {}
# Under gVisor's ptrace platform each address space of a session is a stub process on the
# host, and each stub gets a thread for every sentry thread that ever ran a task in it; stubs
# and their threads are kept after the processes end. So host threads grow towards (stubs) x
# (sentry threads), both about the session's processes plus a few dozen of the daemon's and
# the sentry's own: 8 rounds of fork loops at 42 processes reached 3,868 and kept rising, and
# one more thread past Docker's pids limit ends the whole sandbox (the sentry panics when a
# new stub gets no thread). So a gVisor session gets GVISOR_HOST_PIDS times its pids limit as
# host threads (at least GVISOR_MIN_HOST_THREADS), and as processes one GVISOR_PROCESS_SHARE-th
# of its pids limit, at most the square root of a third of its host threads, which the daemon
# enforces inside (sandbox/pidwatch.py): 30 processes and 8,192 host threads for the default 512.
GVISOR_HOST_PIDS = 16
GVISOR_MIN_HOST_THREADS = 2048
GVISOR_PROCESS_SHARE = 17
GVISOR_MIN_PROCESSES = 8


def gvisor_host_threads(pids: int) -> int:
    """The host threads a gVisor session with ``limits.pids`` = ``pids`` may hold."""
    return max(GVISOR_MIN_HOST_THREADS, pids * GVISOR_HOST_PIDS)


def gvisor_processes(pids: int) -> int:
    """The processes a gVisor session with ``limits.pids`` = ``pids`` may run: their host
    threads grow with their square, so the cap keeps that well inside the host threads."""
    cap = math.isqrt(gvisor_host_threads(pids) // 3)
    return max(GVISOR_MIN_PROCESSES, min(pids // GVISOR_PROCESS_SHARE, cap))


def host_threads(config: SessionConfig) -> int:
    """The container's pids limit: the host threads (gVisor) or processes (runc) it may hold."""
    return gvisor_host_threads(config.limits.pids) if config.gvisor else config.limits.pids


QUOTA_DRIVERS = {"overlay2": "xfs-pquota", "btrfs": "btrfs-qgroup"}

def engine_address(client: docker.DockerClient) -> str:
    """The engine's address, the key of what is remembered per engine: docker-py's base URL is
    http+docker://localhost for every unix socket, so two local engines (the bench runs one
    beside the host's) would share one engine's answers; the socket's path tells them apart."""
    socket_path = getattr(getattr(client.api, "_custom_adapter", None), "socket_path", None)
    return f"unix://{socket_path}" if socket_path else str(client.api.base_url)


# What each engine (by address) passes runsc, gVisor's runtime.
_RUNSC_ARGS: dict[str, list[str]] = {}


def gvisor_without_network(client: docker.DockerClient) -> bool:
    """Whether the engine runs gVisor with ``--network=none``: a gVisor container then has no
    network interface but loopback, whatever network Docker gives it."""
    url = engine_address(client)
    if url not in _RUNSC_ARGS:
        with engine_errors("asking the engine about gVisor"):
            runtimes = client.info().get("Runtimes") or {}
        _RUNSC_ARGS[url] = [str(a) for a in (runtimes.get("runsc") or {}).get("runtimeArgs") or []]
    args = _RUNSC_ARGS[url]
    return "--network=none" in args or any(a == "--network" and b == "none" for a, b in itertools.pairwise(args))



def quota_mechanism(client: docker.DockerClient) -> str | None:
    """The engine's per-container disk bound, found by asking the engine for one: a container
    created (never started) with a size. The storage driver's name is not enough: overlay2 on
    XFS without project quotas refuses sizes, btrfs without quotas takes them and bounds nothing."""
    url = engine_address(client)
    if url in _QUOTAS:
        return _QUOTAS[url]
    with engine_errors("asking the engine about its storage"):
        info = client.info()
        images = client.api.images(quiet=True)
    mechanism = QUOTA_DRIVERS.get(str(info.get("Driver")))
    if mechanism == "btrfs-qgroup":
        mechanism = _btrfs_quota_mode(info)
    if mechanism is not None and not images:
        return mechanism  # nothing to probe with yet: the file system's word, not remembered
    if mechanism is not None and not _takes_a_size(client, images[0]):
        mechanism = None
    _QUOTAS[url] = mechanism
    if mechanism is None:
        log.warning(
            "the engine cannot bound a session's disk: one session can fill it",
            driver=info.get("Driver"), filesystem=dict(info.get("DriverStatus") or []).get("Backing Filesystem"),
            fix="run dockerd on a btrfs data-root with quotas or XFS with pquota (in a checkout of caisson, scripts/setup.sh does); see caisson doctor",
        )
    return mechanism


def _takes_a_size(client: docker.DockerClient, image: str) -> bool:
    probe = None
    try:
        with engine_errors("probing the engine's disk quotas"):
            probe = client.api.create_container(
                image, command=["true"], host_config=client.api.create_host_config(storage_opt={"size": "1G"}),
                labels={LABEL_SESSION: "quota-probe", LABEL_OWNER: "quota-probe"},
            )
        return True
    except docker.errors.APIError:
        return False
    finally:
        if probe is not None:
            remove_container(client, probe["Id"])


def _btrfs_quota_mode(info: dict[str, Any]) -> str | None:
    """btrfs takes a size without quotas enabled and bounds nothing: ask the file system
    which quotas it keeps (a local engine only; a remote one that takes sizes is presumed to
    keep full qgroups, the conservative reading for the size asked)."""
    root = str(info.get("DockerRootDir") or "")
    found = subprocess.run(["findmnt", "-n", "-o", "UUID", "--target", root], capture_output=True, text=True, check=False)
    uuid_ = found.stdout.strip()
    sysfs = Path("/sys/fs/btrfs") / uuid_ / "qgroups"
    if not root or not Path(root).is_dir() or found.returncode != 0 or not uuid_:
        return "btrfs-qgroup"
    if not (sysfs / "enabled").is_file() or (sysfs / "enabled").read_text().strip() != "1":
        return None
    mode = (sysfs / "mode").read_text().strip() if (sysfs / "mode").is_file() else "qgroup"
    return "btrfs-squota" if mode == "squota" else "btrfs-qgroup"


def disk_quotas(client: docker.DockerClient, *, strict: bool, soft_watch: bool = False) -> bool:
    """Whether the engine bounds a container's disk (``soft_watch``: the runtime was told to
    leave that to the host's watch). Without it: an error when ``strict``."""
    if soft_watch and strict:
        raise SessionError(
            "strict_quotas: this runtime bounds disks with the host's soft watch (soft_disk_watch=True), not a "
            "hard limit: turn one of the two off"
        )
    mechanism = None if soft_watch else quota_mechanism(client)
    if mechanism is None and strict:
        raise SessionError(
            "strict_quotas: this engine cannot bound a session's disk (it needs a btrfs data-root with quotas, or "
            "overlay2 on XFS mounted with pquota; `caisson doctor` says how)"
        )
    return mechanism is not None


def _storage_size(client: docker.DockerClient, image: str, disk: str) -> str:
    """The size to ask the engine for: btrfs's full qgroups count the image's layers against a
    container's limit, so they are added to the session's own quota there (simple quotas and
    XFS count only what the container writes)."""
    if quota_mechanism(client) != "btrfs-qgroup":
        return disk
    with engine_errors("asking the engine for the image's size"):
        size = int(client.api.inspect_image(image).get("Size") or 0)
    return str(parse_bytes(disk) + size)


def create_container(
    client: docker.DockerClient,
    session_id: str,
    owner: str,
    config: SessionConfig,
    *,
    listen: bool = False,
    soft_disk: bool = False,
) -> CreatedContainer:
    """``listen``: the daemon also opens its unix socket (the local fast path); ``soft_disk``:
    no engine disk limit, the host's soft watch bounds it."""
    with engine_errors("creating a sandbox container"):
        return _create_container(client, session_id, owner, config, listen, soft_disk)


def _create_container(
    client: docker.DockerClient, session_id: str, owner: str, config: SessionConfig, listen: bool, soft_disk: bool
) -> CreatedContainer:
    if config.gvisor and config.network and gvisor_without_network(client):
        raise SessionError(
            "network=True with gvisor=True: this engine runs gVisor with --network=none, so the session would have "
            "no network at all. Name the hosts it may reach in `egress` instead (the allowlist proxy works under "
            "gVisor), use runc (gvisor=False) for a bridge network, or register runsc without --network=none"
        )
    image = config.image or image_tag()
    injected = not image_carries_daemon(client, image)
    if config.image is None and injected:
        raise ImageError(f"the default image {image} is missing: build it with `caisson image build`")
    expires = f"{time.time() + config.ttl:.0f}"
    memory = parse_bytes(config.limits.memory)
    env = {
        "PYTHONPATH": DAEMON_PARENT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "CAISSON_AGENT_USER": config.agent_user,
        "CAISSON_WORKSPACE": config.workdir,
        # The daemon enforces the TTL itself, so a container outlives no one's deadline
        # even when every controller and reaper is gone.
        "CAISSON_EXPIRES": expires,
        # Background tasks' kept output may use a quarter of the memory, so it never starves the rest.
        "CAISSON_OUTPUT_BUDGET": str(memory // 4),
        **({"CAISSON_IDLE_TIMEOUT": f"{config.idle_timeout:g}"} if config.idle_timeout else {}),
        **({"CAISSON_GRACE": f"{config.grace:g}", "CAISSON_LEASE": LEASE_PATH} if config.grace else {}),
        **({"CAISSON_LISTEN": "1"} if listen else {}),
        # Under gVisor: the daemon makes its commands' clones itself (gVisor ignores CLONE_PARENT).
        **(
            {"CAISSON_GVISOR": "1", "CAISSON_PROCESSES": str(gvisor_processes(config.limits.pids))}
            if config.gvisor
            else {}
        ),
    }
    kwargs: dict[str, object] = {}
    if config.gvisor:
        kwargs["runtime"] = "runsc"
    if config.limits.disk and disk_quotas(client, strict=config.strict_quotas, soft_watch=soft_disk):
        kwargs["storage_opt"] = {"size": _storage_size(client, image, config.limits.disk)}
    try:
        container = client.api.create_container(
            image=image,
            command=["python3", "-m", "sandbox"],
            stdin_open=True,
            # detach=True keeps StdinOnce off: a controller that disconnects must not close
            # the daemon's stdin, or a restarted controller could not re-attach.
            detach=True,
            tty=False,
            user="0",
            working_dir="/",
            environment=env,
            labels={
                LABEL_SESSION: session_id,
                LABEL_OWNER: owner,
                LABEL_TENANT: config.tenant,
                LABEL_EXPIRES: expires,
                LABEL_PROFILE: config.profile,
                **({LABEL_GRACE: f"{config.grace:g}"} if config.grace else {}),
                **({LABEL_LISTEN: "1"} if listen else {}),
                **({LABEL_HOST_THREADS: str(host_threads(config))} if config.gvisor else {}),
            },
            host_config=client.api.create_host_config(
                init=True,
                auto_remove=True,
                cap_drop=["ALL"],
                cap_add=DAEMON_CAPABILITIES + (GVISOR_DAEMON_CAPABILITIES if config.gvisor else []),
                security_opt=["no-new-privileges:true"],
                pids_limit=host_threads(config),
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(config.limits.cpus * 1e9),
                ulimits=[
                    docker.types.Ulimit(name="nofile", soft=config.limits.nofile, hard=config.limits.nofile),
                    docker.types.Ulimit(
                        name="fsize", soft=config.limits.fsize_bytes, hard=config.limits.fsize_bytes
                    ),
                ],
                network_mode="bridge" if config.network else "none",
                log_config=docker.types.LogConfig(type="none"),
                binds={src: {"bind": dst, "mode": "rw"} for src, dst in config.mounts.items()},
                **kwargs,
            ),
        )
    except docker.errors.ImageNotFound:
        raise ImageError(f"image {image!r} is not present: build or pull it first") from None
    except docker.errors.APIError as exc:
        raise SessionError(f"Docker refused to create the sandbox container: {exc.explanation or exc}") from None
    cid = container["Id"]
    # Before start, so nothing inside the container can race the copy.
    if injected and not client.api.put_archive(cid, "/opt", daemon_tar()):
        remove_container(client, cid)
        raise SessionError(f"could not copy the daemon into {image}")
    if config.gvisor and config.image is not None and not config.image.startswith(SNAPSHOT_REPO + ":"):
        keep_tmp_on_layer(client, cid)  # an image of the user's own may have an empty /tmp (snapshots have the marker)
    return CreatedContainer(id=cid, session_id=session_id, image=image, injected=injected)


def start_container(client: docker.DockerClient, container_id: str) -> None:
    try:
        with engine_errors("starting a sandbox container"):
            client.api.start(container_id)
    except docker.errors.APIError as exc:
        raise SessionError(f"Docker could not start the sandbox container: {exc.explanation or exc}") from None


def reachable_pid(client: docker.DockerClient, container_id: str) -> int:
    """The started daemon's host pid when the host can reach its socket, else 0."""
    with engine_errors("asking the engine for a container's process"):
        state = client.api.inspect_container(container_id).get("State") or {}
    return container_root.reachable_pid(int(state.get("Pid") or 0), container_id)


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    try:
        with engine_errors("removing a sandbox container"):
            client.api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "file name too long" in str(exc) and _clear_btrfs_layer(client, container_id):
            remove_container(client, container_id)
            return
        # auto_remove may already be removing it.
        if "removal of container" not in str(exc) and "is already in progress" not in str(exc):
            raise


def _clear_btrfs_layer(client: docker.DockerClient, container_id: str) -> bool:
    """Empty a container's btrfs layer from the host, for the engine's remove to succeed.

    The btrfs driver walks a layer with whole path names before deleting it, so a tree deeper
    than PATH_MAX (an agent's ``mkdir`` loop) makes every remove fail and the container and its
    disk stay. GNU ``rm`` walks by descriptor (no path is too long, no link is followed, no
    other file system is entered). Only for a local engine whose data-root this host sees."""
    with engine_errors("asking the engine where its data lives"):
        info = client.info()
    if info.get("Driver") != "btrfs":
        return False
    root = Path(str(info.get("DockerRootDir") or ""))
    try:
        mount_id = (root / "image" / "btrfs" / "layerdb" / "mounts" / container_id / "mount-id").read_text().strip()
    except OSError:
        return False
    if not mount_id.isalnum():
        return False
    layer = root / "btrfs" / "subvolumes" / mount_id
    children = [str(p) for p in layer.iterdir()] if layer.is_dir() else []
    if children:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", *children], capture_output=True, check=False)
    log.warning("emptied a sandbox's btrfs layer from the host: it held paths too long for the engine", container=container_id[:12])
    return True


def death_cause(client: docker.DockerClient, container_id: str, wait: float = 3.0) -> str | None:
    """Why a container's daemon died, as far as the engine knows (polled briefly: the engine
    records the container's end a moment after its stream closes)."""
    deadline = time.monotonic() + wait
    # Soon at first: auto-remove may follow the exit within a few ms (a daemon's socket ends
    # before the engine marks the container exited); then less often.
    pause = 0.01
    while True:
        try:
            state = client.api.inspect_container(container_id).get("State", {})
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return None  # already removed (auto_remove): nothing more to learn
        if state.get("OOMKilled"):
            return (
                "the container ran out of memory and the kernel killed the daemon; "
                "give the session more memory (limits.memory) or run less at once"
            )
        if not state.get("Running") or time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(0.1, pause * 2)


def empty_file(name: str, *, mtime: int = 0, mode: int = 0o644) -> bytes:
    """An archive of one empty file of root's, for the engine to put into a container."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.mtime, info.mode = mtime, mode
        tar.addfile(info, io.BytesIO(b""))
    return data.getvalue()


# The image's read-only file of root's that keeps /tmp from being empty: gVisor mounts a tmpfs
# of its own over an empty /tmp (its files in the sandbox's memory, out of the disk quota and
# of snapshots). A command run as root can remove it, so every snapshot puts it back, and a
# gVisor container of another image gets it before it starts.
TMP_MARKER = "/tmp/.caisson-layer"


def keep_tmp_on_layer(client: docker.DockerClient, container_id: str) -> None:
    """Put the /tmp marker back into a container's layer (the engine writes it from the host)."""
    try:
        with engine_errors("keeping a session's /tmp on its layer"):
            client.api.put_archive(
                container_id, posixpath.dirname(TMP_MARKER), empty_file(posixpath.basename(TMP_MARKER), mode=0o444)
            )
    except docker.errors.APIError as exc:
        # No /tmp directory, or a full quota: the container goes on as its image or session left it.
        log.warning("could not put the /tmp marker into a container", container=container_id[:12], error=str(exc))


SNAPSHOT_REPO = "caisson/snapshot"


# On a snapshot whose sparse files are kept apart (docker/sparse.py): the store's name.
LABEL_SPARSE = "caisson.sparse"


def snapshot_tag(session_id: str) -> str:
    return f"{session_id}-{uuid.uuid4().hex[:8]}"


def snapshot(
    client: docker.DockerClient, container_id: str, session_id: str, owner: str, ttl: float,
    *, tag: str | None = None, paused: bool = False, sparse: bool = False,
) -> str:
    """Commit a session's file system (paused meanwhile, unless ``paused`` already) as a
    labelled image; its reference. ``sparse``: its sparse files are kept apart under ``tag``."""
    tag = tag or snapshot_tag(session_id)
    labels = {LABEL_OWNER: owner, LABEL_EXPIRES: f"{time.time() + ttl:.0f}", "caisson.snapshot_of": session_id}
    if sparse:
        labels[LABEL_SPARSE] = tag
    try:
        with engine_errors("taking a snapshot"):
            client.api.commit(
                container_id, repository=SNAPSHOT_REPO, tag=tag, conf={"Labels": labels}, pause=not paused
            )
    except docker.errors.APIError as exc:
        raise SessionError(f"Docker could not snapshot session {session_id}: {exc.explanation or exc}") from None
    return f"{SNAPSHOT_REPO}:{tag}"


def snapshot_bytes(client: docker.DockerClient, ref: str) -> int:
    """The layer the commit added (the newest entry of the image's history); 0 once removed."""
    try:
        with engine_errors("sizing a snapshot"):
            history = client.api.history(ref)
    except docker.errors.NotFound:
        return 0
    return int(history[0].get("Size") or 0) if history else 0


def remove_snapshot(client: docker.DockerClient, ref: str) -> None:
    try:
        with engine_errors("removing a snapshot"):
            client.api.remove_image(ref, force=True)
    except docker.errors.NotFound:
        pass


def find_session_container(client: docker.DockerClient, session_id: str) -> dict[str, Any] | None:
    with engine_errors("listing sandbox containers"):
        rows = client.api.containers(all=True, filters={"label": f"{LABEL_SESSION}={session_id}"})
    return rows[0] if rows else None


def list_session_containers(client: docker.DockerClient) -> list[dict[str, Any]]:
    with engine_errors("listing sandbox containers"):
        return client.api.containers(all=True, filters={"label": LABEL_SESSION})
