"""The default sandbox image: content-addressed tag, offline-capable build, daemon injection.

The tag is a hash of what goes into the image (Dockerfile + daemon source), so a
changed daemon gets a new image and an unchanged one is never rebuilt. Where no
registry answers, the Debian base is bootstrapped with debootstrap and imported.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from importlib import resources
from pathlib import Path

import docker
import docker.errors

from caisson.docker import native
from caisson.errors import ImageError
from caisson.logs import get_logger

log = get_logger("caisson.images")

# The daemon's source and the image's Dockerfile ship inside the installed package (the
# project's images/ folder is package data, linked in as runtime/docker/assets).
# The daemon's package: caisson._sandbox on the host, "sandbox" inside every container.
SANDBOX_DIR = Path(str(resources.files("caisson._sandbox")))
DOCKERFILE = Path(str(resources.files("caisson.docker") / "assets" / "Dockerfile"))
IMAGE_REPO = "caisson/sandbox"
PUBLIC_BASE = "debian:bookworm-slim"
# "-2": bases bootstrapped before their / was made 0755 are not reused.
LOCAL_BASE = "caisson/debian-base:bookworm-2"
BASE_PACKAGES = "python3,bash,coreutils,git,ripgrep,procps,ca-certificates,passwd"
DAEMON_LABEL = "caisson.daemon"
# Where the daemon package lives in every sandbox, baked in or injected.
DAEMON_PARENT = "/opt/caisson"


def _daemon_files() -> list[Path]:
    return sorted(p for p in SANDBOX_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def daemon_hash() -> str:
    """What the daemon is: its source, and which native helpers go with it."""
    digest = hashlib.sha256()
    for path in [*_daemon_files(), *(helper.source for helper in native.HELPERS)]:
        digest.update(path.relative_to(SANDBOX_DIR).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    for helper in native.HELPERS:
        digest.update(helper.name.encode() if native.binary(helper) is not None else b"")
    return digest.hexdigest()[:16]


def _dockerfile() -> bytes:
    try:
        return DOCKERFILE.read_bytes()
    except OSError as exc:
        raise ImageError(
            f"the sandbox image's Dockerfile is missing from the installed package ({DOCKERFILE}: "
            f"{exc.strerror}); reinstall caisson-runtime"
        ) from None


def image_tag() -> str:
    digest = hashlib.sha256(_dockerfile())
    digest.update(daemon_hash().encode())
    digest.update(LOCAL_BASE.encode())  # a new local base means a new image
    return f"{IMAGE_REPO}:{digest.hexdigest()[:16]}"


def daemon_tar() -> bytes:
    """The daemon package as an uncompressed tar rooted at DAEMON_PARENT, for put_archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in _daemon_files():
            info = tarfile.TarInfo("caisson/sandbox/" + path.relative_to(SANDBOX_DIR).as_posix())
            data = path.read_bytes()
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for helper in native.HELPERS:
            built = native.binary(helper)
            if built is not None:
                info = tarfile.TarInfo(f"caisson/sandbox/{helper.name}")
                info.size, info.mode = len(built), helper.mode
                tar.addfile(info, io.BytesIO(built))
    return buf.getvalue()


def has_image(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _bootstrap_base(client: docker.DockerClient) -> str:
    """Build a minimal Debian bookworm root with debootstrap and import it as LOCAL_BASE."""
    if shutil.which("debootstrap") is None:
        raise ImageError(
            f"no base image: {PUBLIC_BASE} cannot be pulled and debootstrap is not installed "
            "(install it with `apt-get install debootstrap`, or run scripts/setup.sh)"
        )
    mirror = os.environ.get("CAISSON_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    with tempfile.TemporaryDirectory(prefix="caisson-rootfs-") as root:
        log.info("bootstrapping Debian base with debootstrap (about a minute)", mirror=mirror)
        cmd = ["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", root, mirror]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ImageError(f"debootstrap failed (exit {proc.returncode}): {proc.stderr[-2000:] or proc.stdout[-2000:]}")
        subprocess.run(["rm", "-rf", f"{root}/var/cache/apt/archives", f"{root}/var/lib/apt/lists"], check=False)
        os.chmod(root, 0o755)  # the temporary directory's 0700 would become the image's /
        log.info("importing base image", tag=LOCAL_BASE)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        client.api.import_image_from_data(tar.stdout.read(), repository=LOCAL_BASE.split(":")[0], tag=LOCAL_BASE.split(":")[1])
        tar.wait()
    return LOCAL_BASE


def resolve_base(client: docker.DockerClient) -> str:
    for ref in (LOCAL_BASE, PUBLIC_BASE):
        if has_image(client, ref):
            return ref
    if os.environ.get("CAISSON_OFFLINE") != "1":
        try:
            log.info("pulling base image", ref=PUBLIC_BASE)
            client.images.pull(PUBLIC_BASE)
            return PUBLIC_BASE
        except docker.errors.APIError as exc:
            log.info("base image cannot be pulled; bootstrapping offline", reason=str(exc)[:200])
    return _bootstrap_base(client)


def build_image(client: docker.DockerClient, *, force: bool = False) -> str:
    tag = image_tag()
    if not force and has_image(client, tag):
        log.info("image is up to date", tag=tag)
        return tag
    base = resolve_base(client)
    with tempfile.TemporaryDirectory(prefix="caisson-build-") as ctx:
        (Path(ctx) / "Dockerfile").write_bytes(_dockerfile())
        shutil.copytree(SANDBOX_DIR, Path(ctx) / "sandbox", ignore=shutil.ignore_patterns("__pycache__"))
        for helper in native.HELPERS:
            built = native.binary(helper)
            if built is not None:
                target = Path(ctx) / "sandbox" / helper.name
                target.write_bytes(built)
                target.chmod(helper.mode)
        log.info("building sandbox image", tag=tag, base=base)
        # Host networking: the engine may run without iptables, so the bridge has no egress.
        stream = client.api.build(
            path=ctx,
            tag=tag,
            buildargs={"BASE": base, "DAEMON_HASH": daemon_hash()},
            network_mode="host",
            rm=True,
            decode=True,
        )
        for chunk in stream:
            if "error" in chunk:
                raise ImageError(f"building {tag} failed: {chunk['error'].strip()}")
            line = str(chunk.get("stream", "")).strip()
            if line.startswith("Step "):
                log.info("build", step=line)
    return tag


def list_images(client: docker.DockerClient) -> list[dict[str, object]]:
    current = image_tag()
    rows = []
    for image in client.images.list(name=IMAGE_REPO):
        for ref in image.tags:
            rows.append(
                {
                    "tag": ref,
                    "id": image.short_id,
                    "created": image.attrs.get("Created"),
                    "size_mb": round(image.attrs.get("Size", 0) / 1e6, 1),
                    "current": ref == current,
                }
            )
    return rows


def prune_images(client: docker.DockerClient) -> list[str]:
    """Remove caisson images other than the current tag that no container uses; the tags removed."""
    current = image_tag()
    # From the listing's rows: a container whose image is already gone, or one removed since
    # the listing, would make docker-py's per-container look-up fail the whole prune.
    in_use = {row.get("ImageID") for row in client.api.containers(all=True)}
    removed = []
    for image in client.images.list(name=IMAGE_REPO):
        stale = [t for t in image.tags if t != current]
        if image.id in in_use or not stale or current in image.tags:
            continue
        for ref in stale:
            try:
                client.images.remove(ref)
            except docker.errors.APIError as exc:
                # On a shared engine a container may have started from it since the listing.
                if exc.status_code != 409:
                    raise
                log.info("sandbox image came into use; kept", image=ref)
                continue
            removed.append(ref)
    log.info("pruned sandbox images", removed=len(removed))
    return removed


def image_carries_daemon(client: docker.DockerClient, ref: str) -> bool:
    try:
        labels = client.images.get(ref).labels or {}
    except docker.errors.ImageNotFound:
        raise ImageError(
            f"image {ref!r} is not present: build it (`caisson image build`) or pull it first"
        ) from None
    return labels.get(DAEMON_LABEL) == daemon_hash()
