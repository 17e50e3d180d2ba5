"""A real ``caisson serve`` for tests: the server runs in a thread with its own event loop
(as uvicorn would in its process), tests talk to it over HTTP on loopback."""

from __future__ import annotations

import hashlib
import io
import secrets
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import docker
import httpx

from caisson.docker.images import resolve_base
from caisson.server.models import SessionInfo
from caisson.server.serve import Hosted
from caisson.server.settings import ServeSettings
from caisson.server.store import Store
from tests.loop import run_async

POSTGRES_DOCKERFILE = Path(__file__).with_name("postgres.Dockerfile")


def postgres_image(client: docker.DockerClient) -> str:
    """Debian's PostgreSQL on the project's local base image, built once per Dockerfile."""
    base = resolve_base(client)  # the sandbox image's base: local (debootstrapped) or public
    tag = "caisson-test/postgres:" + hashlib.sha256(POSTGRES_DOCKERFILE.read_bytes() + base.encode()).hexdigest()[:12]
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        # Host networking: the engine may have no iptables, so the bridge has no egress.
        client.images.build(
            path=str(POSTGRES_DOCKERFILE.parent), dockerfile=POSTGRES_DOCKERFILE.name, tag=tag,
            network_mode="host", rm=True, buildargs={"BASE": base},
        )
    return tag


class ServerThread:
    def __init__(self, settings: ServeSettings) -> None:
        self.hosted = Hosted(settings)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="caisson-serve", daemon=True)

    def _main(self) -> None:
        try:
            anyio.run(lambda: self.hosted.run(on_ready=lambda _: self._ready.set()))
        except BaseException as exc:  # reported to the test thread by start()
            self._error = exc
        finally:
            self._ready.set()

    @property
    def url(self) -> str:
        assert self.hosted.url is not None
        return self.hosted.url

    def start(self) -> ServerThread:
        self._thread.start()
        assert self._ready.wait(180), "the server did not start within 3 minutes"
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        self.hosted.stop()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the server did not stop"


@dataclass
class TenantKey:
    tenant_id: str
    token: str
    key_id: str
    url: str
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=120, **kw)


@dataclass
class Api:
    """A running server, its admin key and its store's name (``sqlite`` or ``postgres``)."""

    url: str
    admin_token: str
    store: str
    server: ServerThread

    @property
    def admin(self) -> httpx.Client:
        return admin_client(self.url, self.admin_token)

    def tenant(self, name: str, **quotas: Any) -> TenantKey:
        return make_tenant(self.url, self.admin_token, f"{name}-{self.store}", name, quotas)


def admin_client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def make_tenant(url: str, admin_token: str, name: str, label: str, quotas: dict[str, Any]) -> TenantKey:
    """A new tenant (its name made unique) and a key of it, made with the admin key."""
    with admin_client(url, admin_token) as admin:
        made = admin.post("/tenants", json={"name": f"{name}-{secrets.token_hex(3)}", "quotas": quotas})
        assert made.status_code == 201, made.text
        key = admin.post(f"/tenants/{made.json()['id']}/keys", json={"label": label})
        assert key.status_code == 201, key.text
    return TenantKey(made.json()["id"], key.json()["token"], key.json()["id"], url)


@contextmanager
def approving(
    key: TenantKey, decision: str = "allow_once", tools: tuple[str, ...] | None = None
) -> Iterator[list[dict[str, Any]]]:
    """The tenant's approver while inside (a thread, for sync and async tests alike): every
    pending approval answered with ``decision`` (only those of ``tools``, if given; the others
    denied); yields the approvals answered so far."""
    answered: list[dict[str, Any]] = []
    stop = threading.Event()

    def answer() -> None:
        with key.client() as c:
            while not stop.wait(0.2):
                for pending in c.get("/v1/approvals").json()["items"]:
                    answer = decision if tools is None or pending["tool"] in tools else "deny"
                    r = c.post(f"/v1/approvals/{pending['id']}", json={"decision": answer})
                    if r.status_code == 200:
                        answered.append(r.json())

    thread = threading.Thread(target=answer, name="approver", daemon=True)
    thread.start()
    try:
        yield answered
    finally:
        stop.set()
        thread.join(60)


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def untar(data: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                out[member.name] = f.read()
    return out


def leave_session(store: Store, info: SessionInfo, server: str, url: str | None) -> None:
    """A session in the store as replica ``server`` records one it opens: a seat reserved,
    then filled."""

    async def record() -> None:
        [seat], _ = await store.reserve_seats(info.tenant_id, 1, 10_000, server, info.profile, info.memory)
        await store.fill_seat(seat, info, server, url)

    run_async(record)
